// tests/kv/sentinel_clients.js — ioredis's `sentinels` option or node-redis's createSentinel,
// with their defaults, finding the leader of a 3-replica kv_server through SENTINEL and
// following a kill -9 of it (run by sentinel_clients_test.sh, which says what is checked).
//   node sentinel_clients.js --client ioredis|node-redis --ports P1,P2,P3 --pids A,B,C [--name zab]
'use strict';
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createSentinel, createClient } = require('redis');

const argv = {};
for (let i = 2; i + 1 < process.argv.length; i += 2) argv[process.argv[i].slice(2)] = process.argv[i + 1];
const ports = argv.ports.split(',').map(Number);
const pids = new Map(ports.map((p, i) => [p, Number(argv.pids.split(',')[i])]));
const name = argv.name || 'zab';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (...what) => console.log(`[${new Date().toISOString().slice(11, 23)}]`, ...what);
const sentinels = ports.map((port) => ({ host: '127.0.0.1', port }));

/// The leader's client port, as a replica's SENTINEL answers it (retried while electing).
async function masterPort() {
    for (let i = 0; i < 200; ++i) {
        for (const port of ports) {
            const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: null });
            r.on('error', () => {});
            try {
                await r.connect();
                const addr = await r.call('SENTINEL', 'get-master-addr-by-name', name);
                if (addr) return Number(addr[1]);
            } catch (e) { /* a killed replica */ } finally { r.disconnect(); }
        }
        await sleep(50);
    }
    throw new Error('no master known by any replica');
}

/// Writes `key:i` = `v<i>` one after another through `set`, kills the master after 200, and
/// goes on until 400 are acknowledged; a refused or lost write is retried (SET is idempotent).
async function writeThroughKill(label, set) {
    const master = await masterPort();
    const acked = [];
    let killedAt, resumedAt, errors = 0;
    const deadline = Date.now() + 30000;
    for (let i = 0; acked.length < 400;) {
        assert.ok(Date.now() < deadline, `${label}: writes did not resume within 30 s (${acked.length} acknowledged)`);
        if (i === 200 && killedAt === undefined) {
            process.kill(pids.get(master), 'SIGKILL');
            killedAt = Date.now();
            log(`${label}: killed the master (port ${master}) after ${acked.length} writes`);
        }
        try {
            assert.equal(await set(`${label}:${i}`, `v${i}`), 'OK');
        } catch (e) {
            if (e instanceof assert.AssertionError) throw e;
            if (/^(ERR|WRONGTYPE)/.test(e.message)) throw e;
            errors += 1;
            await sleep(20);
            continue;
        }
        if (killedAt !== undefined && resumedAt === undefined) resumedAt = Date.now();
        acked.push(i);
        i += 1;
    }
    const next = await masterPort();
    assert.notEqual(next, master, 'the killed master is still named');
    log(`${label}: writes resumed ${resumedAt - killedAt} ms after the kill (new master port ` +
        `${next}, ${errors} writes refused or lost meanwhile, retried)`);
    for (const port of ports.filter((p) => p !== master)) {
        const r = new Redis({ port, host: '127.0.0.1' });
        r.on('error', () => {});
        await r.call('ZSYNC');
        const values = await r.mget(...acked.map((n) => `${label}:${n}`));
        acked.forEach((n, j) => assert.equal(values[j], `v${n}`, `${label}:${n} on port ${port}`));
        r.disconnect();
    }
    log(`${label}: all ${acked.length} acknowledged writes on both survivors`);
}

async function withIoredis() {
    const r = new Redis({ sentinels, name });
    r.on('error', () => {});  // reconnects are expected around the kill
    assert.equal(await r.ping(), 'PONG');
    // ioredis's own INFO parser (its ready check; with sentinels it requires role master).
    const info = await new Promise((resolve, reject) => r._readyCheck((e, parsed) => (e ? reject(e) : resolve(parsed))));
    assert.equal(info.role, 'master');
    // Every line parsed into one field (ioredis splits at the first colon, joining the rest):
    // no value holds a colon or a space.
    const lines = (await r.info()).split('\r\n').filter((line) => line && !line.startsWith('#'));
    assert.equal(Object.keys(info).length, lines.length, 'ioredis parsed every INFO line');
    for (const [key, value] of Object.entries(info))
        assert.ok(!/[ :]/.test(value), `ioredis parsed ${key}=${value}`);
    log(`ioredis: connected through SENTINEL to port ${r.stream.remotePort}; INFO parsed, ` +
        `${Object.keys(info).length} fields, role ${info.role}`);
    await writeThroughKill('ioredis', (k, v) => r.set(k, v));
    r.disconnect();
}

async function withNodeRedis() {
    const s = createSentinel({ name, sentinelRootNodes: sentinels });
    s.on('error', () => {});
    let timer;
    await Promise.race([s.connect(), new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('node-redis sentinel did not connect within 15 s')), 15000);
    })]);
    clearTimeout(timer);
    assert.equal(await s.ping(), 'PONG');
    const role = await s.role();  // node-redis's ROLE parser
    assert.equal(role.role, 'master');
    log(`node-redis: connected through SENTINEL; ROLE master with ${role.replicas.length} replicas`);
    // A replica's ROLE parsed by node-redis: a slave following that master.
    assert.equal(role.replicas.length, 2, 'the master lists both replicas');
    const c = createClient({ socket: { host: '127.0.0.1', port: role.replicas[0].port } });
    c.on('error', () => {});
    await c.connect();
    const replicaRole = await c.role();
    assert.equal(replicaRole.role, 'slave');
    assert.equal(replicaRole.state, 'connected');
    await c.close();
    await writeThroughKill('node-redis', (k, v) => s.set(k, v));
    await s.close().catch(() => {});
}

(async () => {
    if (argv.client === 'ioredis') await withIoredis();
    else if (argv.client === 'node-redis') await withNodeRedis();
    else throw new Error(`--client ${argv.client}: ioredis or node-redis`);
    process.exit(0);
})().catch((e) => {
    console.error('FAILED:', e && e.stack ? e.stack : e);
    process.exit(1);
});
