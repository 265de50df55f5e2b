// tests/kv/redis_clients.js — node-redis and ioredis, with their defaults, against a
// 3-replica kv_server (run by redis_clients_test.sh, which says what is checked).
//   node redis_clients.js --ports P1,P2,P3 --leader ID --leader-pid PID
'use strict';
const assert = require('node:assert/strict');
const { createClient, ErrorReply } = require('redis');
const Redis = require('ioredis');
const { ReplyError } = Redis;

const argv = {};
for (let i = 2; i + 1 < process.argv.length; i += 2) argv[process.argv[i].slice(2)] = process.argv[i + 1];
const ports = argv.ports.split(',').map(Number);
const leader = Number(argv.leader);
const follower = (leader % 3) + 1;
const third = (follower % 3) + 1;
const port = (id) => ports[id - 1];
const wrongType = /^WRONGTYPE Operation against a key holding the wrong kind of value/;
/// `promise` rejects with an error of class `type` whose message is Redis's WRONGTYPE.
const rejectsWrongType = (promise, type) => assert.rejects(promise, (e) => {
    assert.ok(e instanceof type, `${e && e.constructor && e.constructor.name} is not ${type.name}`);
    assert.match(e.message, wrongType);
    return true;
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (...what) => console.log(`[${new Date().toISOString().slice(11, 23)}]`, ...what);
const info = async (r, section) => {
    const fields = {};
    for (const line of (await r.call('INFO', ...(section ? [section] : []))).split('\r\n')) {
        const at = line.indexOf(':');
        if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1);
    }
    return fields;
};
const ioredis = (id) => {
    const r = new Redis({ port: port(id), host: '127.0.0.1', lazyConnect: false });
    r.on('error', () => {});  // reconnects are expected around the leader kill
    return r;
};

/// Hashes, lists, sets and sorted sets through node-redis's methods on `c`, its keys under
/// `prefix`. `resp2`: a RESP2 connection (else node-redis's default, RESP3: maps, sets and
/// doubles, which node-redis decodes by their types).
async function nodeRedisCollections(c, prefix, resp2) {
    log(`node-redis (${resp2 ? 'RESP2' : 'its defaults'}): hashes, lists, sets, sorted sets, TYPE, WRONGTYPE, MULTI/EXEC`);
    const k = (name) => `${prefix}:c:${name}`;
    const hash = { f1: 'A', f2: 'b', n: '3' };
    assert.equal(await c.set(k('a'), 'v'), 'OK');
    assert.equal(await c.hSet(k('h'), { f1: 'a', f2: 'b' }), 2);
    assert.equal(await c.hSet(k('h'), 'f1', 'A'), 0);
    assert.equal(await c.hGet(k('h'), 'f1'), 'A');
    assert.equal(await c.hGet(k('h'), 'none'), null);
    assert.equal(await c.hIncrBy(k('h'), 'n', 5), 5);
    assert.equal(await c.hIncrBy(k('h'), 'n', -2), 3);
    assert.deepEqual({ ...(await c.hGetAll(k('h'))) }, hash);
    assert.deepEqual(await c.hmGet(k('h'), ['f1', 'f2', 'n', 'none']), ['A', 'b', '3', null]);
    assert.equal(await c.rPush(k('l'), ['b', 'c']), 2);
    assert.equal(await c.lPush(k('l'), 'a'), 3);
    assert.deepEqual(await c.lRange(k('l'), 0, -1), ['a', 'b', 'c']);
    assert.equal(await c.lPop(k('l')), 'a');
    assert.deepEqual(await c.lRange(k('l'), 0, -1), ['b', 'c']);
    assert.equal(await c.sAdd(k('s'), ['x', 'y', 'z']), 3);
    assert.equal(await c.sAdd(k('s'), 'x'), 0);
    assert.deepEqual([...(await c.sMembers(k('s')))].sort(), ['x', 'y', 'z']);
    assert.equal(Number(await c.sIsMember(k('s'), 'y')), 1);
    assert.equal(await c.sRem(k('s'), ['y', 'none']), 1);
    assert.equal(Number(await c.sIsMember(k('s'), 'y')), 0);
    assert.deepEqual([...(await c.sMembers(k('s')))].sort(), ['x', 'z']);
    assert.equal(await c.zAdd(k('z'), [{ score: 1, value: 'one' }, { score: 2, value: 'two' },
                                       { score: 0.5, value: 'half' }]), 3);
    assert.equal(await c.zAdd(k('z'), { score: 2.5, value: 'two' }), 0);
    assert.deepEqual(await c.zRange(k('z'), 0, -1), ['half', 'one', 'two']);
    assert.deepEqual(await c.zRangeWithScores(k('z'), 0, -1),
                     [{ value: 'half', score: 0.5 }, { value: 'one', score: 1 }, { value: 'two', score: 2.5 }]);
    assert.equal(await c.zScore(k('z'), 'two'), 2.5);
    assert.equal(await c.zScore(k('z'), 'none'), null);
    assert.equal(await c.zIncrBy(k('z'), 1, 'two'), 3.5);
    assert.deepEqual(await c.zPopMin(k('z')), { value: 'half', score: 0.5 });
    assert.deepEqual(await c.zRange(k('z'), 0, -1), ['one', 'two']);
    for (const [key, type] of [['h', 'hash'], ['l', 'list'], ['s', 'set'], ['z', 'zset'], ['a', 'string'], ['none', 'none']])
        assert.equal(await c.type(k(key)), type, `TYPE ${k(key)}`);
    await rejectsWrongType(c.lPush(k('h'), 'x'), ErrorReply);
    await rejectsWrongType(c.get(k('l')), ErrorReply);
    await rejectsWrongType(c.sAdd(k('a'), 'x'), ErrorReply);
    await rejectsWrongType(c.hGet(k('z'), 'f'), ErrorReply);
    assert.deepEqual(await c.hmGet(k('h'), ['f1', 'f2', 'n']), ['A', 'b', '3']);  // unchanged
    const block = c.multi().rPush(k('tl'), ['1', '2']).lPop(k('tl')).lRange(k('tl'), 0, -1)
        .sAdd(k('ts'), ['m1', 'm2']).sRem(k('ts'), 'm1').sMembers(k('ts')).type(k('ts'))
        .zAdd(k('tz'), { score: 3, value: 'm' }).hSet(k('th'), 'f', 'v').hGet(k('th'), 'f');
    block.zScore(k('tz'), 'm').hGetAll(k('th'));
    const replies = (await block.exec()).map((reply) => (reply instanceof Set ? [...reply] : reply));
    replies[replies.length - 1] = { ...replies[replies.length - 1] };
    assert.deepEqual(replies, [2, '1', ['2'], 2, 1, ['m2'], 'set', 1, 1, 'v', 3, { f: 'v' }]);
    assert.deepEqual(await c.lRange(k('tl'), 0, -1), ['2']);
    assert.equal(await c.type(k('th')), 'hash');
}

async function withNodeRedis() {
    log('node-redis: connect with the defaults (RESP3 HELLO, CLIENT SETINFO) to follower', follower);
    const c = createClient({ url: `redis://127.0.0.1:${port(follower)}` });
    c.on('error', (e) => log('node-redis error event:', e.message));
    // node-redis retries a failed handshake for ever: give up after 10 s.
    let timer;
    await Promise.race([c.connect(), new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('node-redis did not connect within 10 s')), 10000);
    })]);
    clearTimeout(timer);
    assert.equal(await c.ping(), 'PONG');
    const k = (name) => `nr:${name}`;
    assert.equal(await c.set(k('a'), '1'), 'OK');
    assert.equal(await c.sendCommand(['SET', k('a'), '2', 'NX']), null);
    assert.equal(await c.sendCommand(['SET', k('a'), '3', 'XX', 'GET']), '1');
    assert.equal(await c.get(k('a')), '3');
    assert.equal(await c.incrBy(k('n'), 10), 10);
    assert.equal(await c.decr(k('n')), 9);
    assert.equal(await c.decrBy(k('n'), 4), 5);
    assert.equal(Number(await c.incrByFloat(k('f'), 1.5)), 1.5);
    assert.equal(await c.mSet([k('m1'), 'x', k('m2'), 'y']), 'OK');
    assert.deepEqual(await c.mGet([k('m1'), k('m2'), k('none')]), ['x', 'y', null]);
    assert.equal(await c.append(k('m1'), 'yz'), 3);
    assert.equal(await c.strLen(k('m1')), 3);
    assert.equal(await c.exists([k('m1'), k('m2'), k('none')]), 2);
    assert.equal(await c.del([k('m1'), k('m2'), k('none')]), 2);
    assert.equal(await c.expire(k('a'), 100), 1);
    const ttl = await c.ttl(k('a'));
    assert.ok(ttl > 98 && ttl <= 100, `TTL ${ttl}`);
    assert.equal(await c.persist(k('a')), 1);
    assert.equal(await c.ttl(k('a')), -1);
    assert.equal(await c.type(k('a')), 'string');
    assert.deepEqual((await c.keys('nr:*')).sort(), [k('a'), k('f'), k('n')]);
    const scanned = [];
    for await (const batch of c.scanIterator({ MATCH: 'nr:*', COUNT: 1 }))
        scanned.push(...(Array.isArray(batch) ? batch : [batch]));
    assert.deepEqual(scanned.sort(), [k('a'), k('f'), k('n')]);
    assert.ok((await c.dbSize()) >= 3);

    log('node-redis: MULTI/EXEC, and an aborted block');
    assert.deepEqual(await c.multi().set(k('t'), 'v').incr(k('tn')).get(k('t')).exec(), ['OK', 1, 'v']);
    await assert.rejects(c.multi().set(k('aborted'), 'x').addCommand(['NOSUCH']).exec());
    assert.equal(await c.get(k('aborted')), null);

    log('node-redis: 10,000 INCRs pipelined through follower', follower);
    const replies = await Promise.all(Array.from({ length: 10000 }, () => c.incr(k('pipe'))));
    assert.equal(replies.length, 10000);
    assert.equal(Math.max(...replies), 10000);
    assert.equal(await c.get(k('pipe')), '10000');

    await nodeRedisCollections(c, 'nr', false);
    // The same on a RESP2 connection: each protocol's shapes (a map or a flat array for
    // HGETALL, a double or a bulk string for ZSCORE, ...) decode to the same values.
    const c2 = createClient({ url: `redis://127.0.0.1:${port(follower)}`, RESP: 2 });
    c2.on('error', (e) => log('node-redis (RESP2) error event:', e.message));
    await c2.connect();
    await nodeRedisCollections(c2, 'nr2', true);
    await c2.quit();
    await c.quit();
}

async function withIoredis() {
    log('ioredis: connect with the defaults to follower', third);
    const r = ioredis(third);
    const k = (name) => `io:${name}`;
    assert.equal(await r.ping(), 'PONG');
    assert.equal(await r.select(0), 'OK');
    await assert.rejects(r.select(1), /DB index is out of range/);
    await r.select(0);
    // ioredis with {db: 1} reports SELECT's error and becomes ready anyway: its writes must
    // be refused, not land in database 0.
    const wrongDb = new Redis({ port: port(third), host: '127.0.0.1', db: 1 });
    wrongDb.on('error', () => {});
    await assert.rejects(wrongDb.set(k('db1'), 'x'), /selected database 1/);
    wrongDb.disconnect();
    assert.equal(await r.exists(k('db1')), 0);
    assert.equal(await r.set(k('a'), '1', 'EX', 50), 'OK');
    assert.ok((await r.pttl(k('a'))) > 49000);
    assert.equal(await r.setnx(k('a'), 'x'), 0);
    assert.equal(await r.getset(k('a'), '2'), '1');
    assert.equal(await r.ttl(k('a')), -1);  // GETSET clears the expiry
    assert.equal(await r.getdel(k('a')), '2');
    assert.equal(await r.msetnx(k('x'), '1', k('y'), '2'), 1);
    assert.equal(await r.msetnx(k('y'), '3', k('z'), '4'), 0);
    assert.equal(await r.setex(k('s'), 100, 'v'), 'OK');
    assert.equal(await r.incrby(k('n'), -3), -3);
    await assert.rejects(r.incr(k('s')), /not an integer/);
    const [cursor, keys] = await r.scan('0', 'MATCH', 'io:*', 'COUNT', 1000);
    assert.equal(cursor, '0');
    assert.deepEqual(keys.sort(), [k('n'), k('s'), k('x'), k('y')]);

    log('ioredis: MULTI/EXEC, an aborted block, WATCH');
    assert.deepEqual(await r.multi().set(k('t'), 'v').incr(k('tn')).get(k('t')).exec(),
                     [[null, 'OK'], [null, 1], [null, 'v']]);
    await assert.rejects(r.multi().set(k('aborted'), 'x').call('NOSUCH').exec(), /EXECABORT/);
    assert.equal(await r.get(k('aborted')), null);
    const other = ioredis(leader);
    await r.watch(k('w'));
    await other.set(k('w'), 'changed');
    // A follower's WATCH sees the leader's write only once applied: wait for it here.
    for (let i = 0; i < 100 && (await r.get(k('w'))) !== 'changed'; ++i) await sleep(20);
    assert.equal(await r.multi().set(k('w'), 'mine').exec(), null);
    assert.equal(await r.get(k('w')), 'changed');
    await r.watch(k('w'));
    assert.deepEqual(await r.multi().set(k('w'), 'mine').exec(), [[null, 'OK']]);

    log('ioredis: hashes, lists, sets, sorted sets, TYPE, WRONGTYPE, MULTI/EXEC over them');
    assert.equal(await r.hset(k('h'), { f1: 'a', f2: 'b' }), 2);
    assert.equal(await r.hset(k('h'), 'f1', 'A'), 0);
    assert.equal(await r.hget(k('h'), 'f1'), 'A');
    assert.equal(await r.hget(k('h'), 'none'), null);
    assert.equal(await r.hincrby(k('h'), 'n', 5), 5);
    assert.equal(await r.hincrby(k('h'), 'n', -2), 3);
    assert.deepEqual(await r.hgetall(k('h')), { f1: 'A', f2: 'b', n: '3' });
    assert.equal(await r.rpush(k('l'), 'b', 'c'), 2);
    assert.equal(await r.lpush(k('l'), 'a'), 3);
    assert.deepEqual(await r.lrange(k('l'), 0, -1), ['a', 'b', 'c']);
    assert.equal(await r.lpop(k('l')), 'a');
    assert.deepEqual(await r.lrange(k('l'), 0, -1), ['b', 'c']);
    assert.equal(await r.sadd(k('set'), 'x', 'y', 'z'), 3);
    assert.equal(await r.sadd(k('set'), 'x'), 0);
    assert.deepEqual((await r.smembers(k('set'))).sort(), ['x', 'y', 'z']);
    assert.equal(await r.sismember(k('set'), 'y'), 1);
    assert.equal(await r.srem(k('set'), 'y', 'none'), 1);
    assert.equal(await r.sismember(k('set'), 'y'), 0);
    assert.deepEqual((await r.smembers(k('set'))).sort(), ['x', 'z']);
    assert.equal(await r.zadd(k('z'), 1, 'one', 2, 'two', 0.5, 'half'), 3);
    assert.equal(await r.zadd(k('z'), 2.5, 'two'), 0);
    assert.deepEqual(await r.zrange(k('z'), 0, -1, 'WITHSCORES'), ['half', '0.5', 'one', '1', 'two', '2.5']);
    assert.equal(await r.zscore(k('z'), 'two'), '2.5');
    assert.equal(await r.zscore(k('z'), 'none'), null);
    assert.deepEqual(await r.zpopmin(k('z')), ['half', '0.5']);
    assert.deepEqual(await r.zrange(k('z'), 0, -1), ['one', 'two']);
    for (const [key, type] of [['h', 'hash'], ['l', 'list'], ['set', 'set'], ['z', 'zset'], ['s', 'string'], ['none', 'none']])
        assert.equal(await r.type(k(key)), type, `TYPE ${k(key)}`);
    await rejectsWrongType(r.lpush(k('h'), 'x'), ReplyError);
    await rejectsWrongType(r.get(k('l')), ReplyError);
    await rejectsWrongType(r.sadd(k('s'), 'x'), ReplyError);
    await rejectsWrongType(r.hget(k('z'), 'f'), ReplyError);
    assert.deepEqual(await r.hgetall(k('h')), { f1: 'A', f2: 'b', n: '3' });
    assert.deepEqual(await r.multi().rpush(k('tl'), '1', '2').lpop(k('tl')).lrange(k('tl'), 0, -1)
        .sadd(k('ts'), 'm1', 'm2').srem(k('ts'), 'm1').smembers(k('ts')).type(k('ts'))
        .zadd(k('tz'), 3, 'm').zscore(k('tz'), 'm').exec(),
                     [[null, 2], [null, '1'], [null, ['2']], [null, 2], [null, 1], [null, ['m2']],
                      [null, 'set'], [null, 1], [null, '3']]);
    // A WRONGTYPE inside a block: EXEC answers it in its place, the other commands apply.
    const mixed = await r.multi().rpush(k('tl'), '3').sadd(k('tl'), 'x').llen(k('tl')).exec();
    assert.deepEqual([mixed[0], mixed[2]], [[null, 2], [null, 2]]);
    assert.ok(mixed[1][0] instanceof ReplyError, 'the SADD on a list failed in the block');
    assert.match(mixed[1][0].message, wrongType);
    assert.deepEqual(await r.lrange(k('tl'), 0, -1), ['2', '3']);

    log('ioredis: 10,000 INCRs in one pipeline through follower', third);
    const pipeline = r.pipeline();
    for (let i = 0; i < 10000; ++i) pipeline.incr(k('pipe'));
    const results = await pipeline.exec();
    assert.equal(results.filter(([error]) => error).length, 0, 'no command of the pipeline fails');
    assert.equal(await r.get(k('pipe')), '10000');

    log('ioredis: expiry, the same on every replica');
    const all = [ioredis(1), ioredis(2), ioredis(3)];
    assert.equal(await r.set(k('e'), 'v', 'PX', 300), 'OK');
    assert.equal(await r.exists(k('e')), 1);
    await sleep(600);
    for (const each of all) {
        assert.equal(await each.get(k('e')), null);
        assert.equal(await each.ttl(k('e')), -2);
    }
    // Removed by a replicated TICK: the replicas' states (keys, expiries) are equal.
    let digests = [];
    for (let i = 0; i < 100; ++i) {
        for (const each of all) await each.call('ZSYNC');
        digests = await Promise.all(all.map(async (each) => (await info(each, 'DIGEST')).digest));
        if (digests.every((d) => d === digests[0])) break;
        await sleep(50);
    }
    assert.ok(digests.every((d) => d === digests[0]), `digests ${digests}`);
    assert.ok(Number((await info(other)).ticks_proposed) >= 1, 'the leader proposed a TICK');

    log('ioredis: finding the leader (INFO, CLIENT REDIRECT)');
    for (const each of all) {
        const fields = await info(each);
        assert.equal(`${fields.leader_client_host}:${fields.leader_client_port}`, `127.0.0.1:${port(leader)}`);
        for (const id of [1, 2, 3])
            assert.match(fields[`member_${id}`], new RegExp(`,client_host=127\\.0\\.0\\.1,client_port=${port(id)}$`));
    }
    const redirected = ioredis(follower);
    await redirected.call('CLIENT', 'REDIRECT', 'ON');
    await assert.rejects(redirected.set(k('r'), '1'), new RegExp(`REDIRECT 127.0.0.1:${port(leader)}`));
    redirected.disconnect();
    other.disconnect();
    for (const each of all) each.disconnect();
    r.disconnect();
}

async function leaderKill() {
    log('writes through follower', follower, 'while leader', leader, 'is killed');
    const r = ioredis(follower);
    const acked = [];
    const deadline = Date.now() + 30000;
    let killed = false, refused = 0;
    // Due after the leader is gone: the next leader must remove it (its own TICK).
    assert.equal(await r.set('exp:across', 'v', 'PX', 1500), 'OK');
    for (let i = 0; acked.length < 600; ) {
        if (Date.now() > deadline) throw new Error(`only ${acked.length} writes acknowledged in 30 s`);
        if (!killed && acked.length === 200) {
            process.kill(Number(argv['leader-pid']), 'SIGKILL');
            killed = true;
        }
        try {
            // Several in flight at once, as an application would.
            const batch = Array.from({ length: 10 }, (_, j) => i + j);
            const replies = await Promise.allSettled(batch.map((n) => r.set(`ack:${n}`, `v${n}`)));
            replies.forEach((reply, j) => {
                if (reply.status === 'fulfilled') acked.push(batch[j]);
                else ++refused;
            });
            i += 10;
        } catch (e) {
            await sleep(50);
        }
        if (killed && refused > 0) await sleep(20);
    }
    log(`${acked.length} acknowledged, ${refused} refused; reading them back`);
    for (const id of [follower, third]) {
        const each = ioredis(id);
        await each.call('ZSYNC');
        const values = await each.mget(...acked.map((n) => `ack:${n}`));
        acked.forEach((n, j) => assert.equal(values[j], `v${n}`, `ack:${n} on replica ${id}`));
        each.disconnect();
    }
    log('the key due after the kill is removed by the new leader, the same on both');
    const survivors = [ioredis(follower), ioredis(third)];
    let removed = false;
    for (let i = 0; i < 100 && !removed; ++i) {
        const fields = await Promise.all(survivors.map((each) => info(each)));
        const digests = await Promise.all(survivors.map(async (each) => {
            await each.call('ZSYNC');
            return (await info(each, 'DIGEST')).digest;
        }));
        removed = fields.some((f) => f.replica_role === 'leading' && Number(f.ticks_proposed) >= 1) &&
                  digests[0] === digests[1];
        if (!removed) await sleep(50);
    }
    assert.ok(removed, 'the new leader proposed a TICK and the survivors agree');
    for (const each of survivors) {
        assert.equal(await each.exists('exp:across'), 0);
        each.disconnect();
    }
    r.disconnect();
}

(async () => {
    const started = Date.now();
    await withNodeRedis();
    await withIoredis();
    await leaderKill();
    log(`all checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    process.exit(0);
})().catch((e) => {
    console.error('FAILED:', e && e.stack ? e.stack : e);
    process.exit(1);
});
