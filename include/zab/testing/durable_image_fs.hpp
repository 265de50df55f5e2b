// zab/testing/durable_image_fs.hpp — an in-memory `zab::file_system` that remembers what is
// durable, so that a test can pull the plug on a file_log (issue #6).
//
// What it models. Each file has its current bytes (what the page cache holds: every read
// sees them) and its durable bytes (as of its last fdatasync or fsync). Each directory has
// its current entries and its durable entries (as of its last fsync): creating, renaming
// and unlinking a file changes the current entries at once and the durable ones only when
// the directory is synced. fsync of a file never makes its name durable, and fsync of a
// directory never makes a file's bytes durable: the weakest reading of POSIX, the one that
// loses most.
//
// `kill()` is kill -9 of the process: every descriptor and lock is gone, but the page cache
// survives — the next open reads what was written, synced or not, and a power loss after it
// still loses what nobody synced (issue 34, defect 3: "kill, then power loss").
//
// `power_loss()` restarts from the durable image: every descriptor is gone, and what was not
// synced is lost. `power_loss(random)` is the crash of include/zab/testing/sim_log.hpp and of
// FoundationDB's AsyncFileNonDurable (docs/design.md rule 11) for real files: every 4 KiB page
// written since the file's last sync is independently kept, dropped (the durable bytes stay)
// or torn — each 512-byte sector of it new or old, or garbage where the sector held no
// durable byte (sectors are written atomically, so a torn write never destroys bytes that
// were synced before); a changed file size is kept or dropped (a grown file may then end in
// zeros, a shrunk one gets its old tail back). Every directory operation since the
// directory's last fsync is independently kept or dropped, in order: POSIX orders none of
// them, so a later unlink may land while an earlier rename does not.
//
// `lose_synced_tail(path, size)` is a disk that lost synced data (the file shorter in the
// durable image too); `durable_copy()` and `restore(image)` are an operator's backup of the
// directory and its restoration.
//
// Fault injection: `skip_syncs(site)` makes the syncs of one `zab::sync_site` succeed
// without moving the durable image — as if someone had deleted that fsync from file_log —
// and `fail_after(n)` cuts the power after n more operations that change the disk: every
// call then fails with EIO (the log enters its failed state) until `power_loss`. That is
// how a crash lands between any two steps of a flush job or of a recovery.
//
// Single-threaded; deterministic (std::map throughout, zab's own prng for every choice).
// flock is an in-memory lock released when its descriptor closes.
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/storage/file_system.hpp"
#include "zab/testing/random.hpp"

namespace zab::testing {

/// The fate of un-synced data at `durable_image_fs::power_loss(random, weights)`: relative
/// weights (need not sum to 1), as in disk_options. A page is kept, dropped or torn; a
/// directory operation or a size change is kept with probability keep / (sum), else dropped.
struct power_loss_weights {
    double keep = 0.4;
    double drop = 0.4;
    double tear = 0.2;
};

/// What a durable_image_fs saw, for tests that must know a path was exercised.
struct durable_image_stats {
    std::uint64_t operations = 0;  ///< calls that change the disk (the unit of `fail_after`)
    std::uint64_t power_losses = 0;
    std::uint64_t kills = 0;
    std::array<std::uint64_t, sync_site_count> syncs{};          ///< per site, skipped included
    std::array<std::uint64_t, sync_site_count> syncs_skipped{};  ///< per site
};

class durable_image_fs final : public file_system {
public:
    static constexpr std::size_t page_bytes = 4096;
    static constexpr std::size_t sector_bytes = 512;

    /// An empty file system: only the root directory "/", durable.
    durable_image_fs() { nodes_[root_id].is_directory = true; }

    durable_image_fs(const durable_image_fs&) = delete;
    durable_image_fs& operator=(const durable_image_fs&) = delete;

    // --- fault injection --------------------------------------------------------------------

    /// From now on the syncs of `site` succeed without making anything durable (or, with
    /// `skip` false, work again).
    void skip_syncs(sync_site site, bool skip = true) { skipped_[index(site)] = skip; }

    /// The power fails after `operations` more calls that change the disk (0: the next one):
    /// that call and every later one fail with EIO until `power_loss`.
    void fail_after(std::uint64_t operations) { countdown_ = operations; }

    /// Cancels a `fail_after` that has not run out.
    void cancel_fail_after() noexcept { countdown_.reset(); }

    /// Whether the power has failed (`fail_after` ran out) and `power_loss` is due.
    bool powered_off() const noexcept { return powered_off_; }

    /// kill -9 of the process that used this file system: its descriptors and locks are
    /// gone, the page cache (every write, every directory change) stays, un-synced. A
    /// `fail_after` that ran out is cleared (the process died where its calls failed).
    void kill() {
        descriptors_.clear();
        locks_.clear();
        powered_off_ = false;
        countdown_.reset();
        ++stats_.kills;
    }

    /// Power loss: the durable image is all that is left. Every descriptor and lock is gone;
    /// files no durable entry reaches are freed.
    void power_loss() {
        for (auto& [id, n] : nodes_) {
            n.entries = n.durable_entries;
            n.pending.clear();
            n.bytes = n.durable_bytes;
        }
        restart();
    }

    /// Power loss in which the un-synced state is at the mercy of `random` (see the file
    /// comment), then as `power_loss()`.
    void power_loss(prng& random, power_loss_weights weights = {}) {
        ZAB_ASSERT(weights.keep >= 0 && weights.drop >= 0 && weights.tear >= 0 &&
                       weights.keep + weights.drop + weights.tear > 0,
                   "power_loss_weights: non-negative, not all zero");
        for (auto& [id, n] : nodes_) {
            if (n.is_directory) {
                for (const directory_operation& op : n.pending)
                    if (survives(random, weights)) apply(n.durable_entries, op);
            } else {
                n.durable_bytes = crash_image(n, random, weights);
            }
        }
        power_loss();
    }

    const durable_image_stats& stats() const noexcept { return stats_; }

    // --- setup and inspection ----------------------------------------------------------------

    /// Creates directory `path` and its missing parents, durably (test set-up).
    void make_durable_directories(const std::string& path) {
        node_id at = root_id;
        for (const std::string& part : split(path)) {
            auto it = nodes_.at(at).entries.find(part);
            if (it == nodes_.at(at).entries.end()) {
                const node_id made = new_node(true);
                nodes_.at(at).entries[part] = made;
                nodes_.at(at).durable_entries[part] = made;
                at = made;
            } else {
                ZAB_ASSERT(nodes_.at(it->second).is_directory, "a file is in the way");
                at = it->second;
            }
        }
    }

    /// A disk or file system that lost synced data: file `path` now ends at `size`, in the
    /// page cache and in the durable image alike (a shorter file only; false if there is no
    /// such file). What a lost synced tail leaves (issue 34, defect 10).
    bool lose_synced_tail(const std::string& path, std::uint64_t size) {
        const auto id = resolve(path);
        if (!id || nodes_.at(*id).is_directory) return false;
        node& n = nodes_.at(*id);
        if (size > n.bytes.size() || size > n.durable_bytes.size()) return false;
        n.bytes.resize(static_cast<std::size_t>(size));
        n.durable_bytes.resize(static_cast<std::size_t>(size));
        return true;
    }

    /// What a power loss now would leave for certain (every file's durable bytes under the
    /// durable entries): a backup, for `restore`.
    class image {
        friend class durable_image_fs;
        std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> bytes_;
        std::vector<std::pair<std::uint64_t, std::map<std::string, std::uint64_t>>> entries_;
        std::uint64_t next_node_ = 0;
    };
    image durable_copy() const {
        image out;
        for (const auto& [id, n] : nodes_) {
            if (n.is_directory) out.entries_.emplace_back(id, n.durable_entries);
            else out.bytes_.emplace_back(id, n.durable_bytes);
        }
        out.next_node_ = next_node_;
        return out;
    }
    /// The disk replaced by `backup` (an operator restoring a backup of the data directory
    /// with the process stopped): every descriptor and lock is gone, all of it is durable.
    void restore(const image& backup) {
        nodes_.clear();
        for (const auto& [id, entries] : backup.entries_) {
            node& n = nodes_[id];
            n.is_directory = true;
            n.entries = n.durable_entries = entries;
        }
        for (const auto& [id, bytes] : backup.bytes_) {
            node& n = nodes_[id];
            n.bytes = n.durable_bytes = bytes;
        }
        next_node_ = backup.next_node_;
        descriptors_.clear();
        locks_.clear();
        powered_off_ = false;
        countdown_.reset();
    }

    /// How many bytes of files differ between the page cache and the durable image (a size
    /// change counts the bytes it adds or removes): what a power loss now could take.
    std::uint64_t unsynced_bytes() const {
        std::uint64_t total = 0;
        for (const auto& [id, n] : nodes_) {
            if (n.is_directory) continue;
            const std::size_t common = std::min(n.bytes.size(), n.durable_bytes.size());
            for (std::size_t i = 0; i < common; ++i) total += n.bytes[i] != n.durable_bytes[i];
            total += std::max(n.bytes.size(), n.durable_bytes.size()) - common;
        }
        return total;
    }

    /// The current bytes of file `path` (what a read sees), if it exists.
    std::optional<std::vector<std::byte>> contents(const std::string& path) const {
        const auto id = resolve(path);
        if (!id || nodes_.at(*id).is_directory) return std::nullopt;
        return nodes_.at(*id).bytes;
    }

    // --- zab::file_system --------------------------------------------------------------------

    int open_directory(const std::string& path, int& fd) override {
        if (powered_off_) return EIO;
        const auto id = resolve(path);
        if (!id) return ENOENT;
        if (!nodes_.at(*id).is_directory) return ENOTDIR;
        fd = open_descriptor(*id, false);
        return 0;
    }

    int make_directory(const std::string& path) override {
        if (!step()) return EIO;
        auto parts = split(path);
        if (parts.empty()) return EEXIST;
        const std::string name = parts.back();
        parts.pop_back();
        const auto parent = resolve_parts(parts);
        if (!parent) return ENOENT;
        node& p = nodes_.at(*parent);
        if (!p.is_directory) return ENOTDIR;
        if (p.entries.count(name) != 0) return EEXIST;
        link(*parent, name, new_node(true));
        return 0;
    }

    int lock_directory(int directory_fd) override {
        if (powered_off_) return EIO;
        const auto it = descriptors_.find(directory_fd);
        if (it == descriptors_.end()) return EBADF;
        const auto held = locks_.find(it->second.id);
        if (held != locks_.end() && held->second != directory_fd) return EWOULDBLOCK;
        locks_[it->second.id] = directory_fd;
        return 0;
    }

    int list_directory(const std::string& path, std::vector<std::string>& names) override {
        if (powered_off_) return EIO;
        const auto id = resolve(path);
        if (!id) return ENOENT;
        if (!nodes_.at(*id).is_directory) return ENOTDIR;
        names.clear();
        for (const auto& [name, child] : nodes_.at(*id).entries) names.push_back(name);
        return 0;
    }

    int sync_directory(int directory_fd, sync_site site) override {
        if (!step()) return EIO;
        const auto it = descriptors_.find(directory_fd);
        if (it == descriptors_.end()) return EBADF;
        node& n = nodes_.at(it->second.id);
        if (!n.is_directory) return ENOTDIR;
        if (counted_sync_skipped(site)) return 0;
        n.durable_entries = n.entries;
        n.pending.clear();
        return 0;
    }

    int open_file(int directory_fd, const std::string& name, open_mode mode, int& fd) override {
        const bool creates =
            mode == open_mode::create_exclusive || mode == open_mode::create_or_truncate;
        if (creates ? !step() : powered_off_) return EIO;
        const auto dir = descriptors_.find(directory_fd);
        if (dir == descriptors_.end()) return EBADF;
        node& d = nodes_.at(dir->second.id);
        if (!d.is_directory) return ENOTDIR;
        const auto found = d.entries.find(name);
        const bool writable = mode != open_mode::read_only;
        if (found == d.entries.end()) {
            if (!creates) return ENOENT;
            const node_id made = new_node(false);
            link(dir->second.id, name, made);
            fd = open_descriptor(made, writable);
            return 0;
        }
        if (mode == open_mode::create_exclusive) return EEXIST;
        node& existing = nodes_.at(found->second);
        if (existing.is_directory) return EISDIR;
        if (mode == open_mode::create_or_truncate) existing.bytes.clear();
        fd = open_descriptor(found->second, writable);
        return 0;
    }

    int rename_file(int directory_fd, const std::string& from, const std::string& to) override {
        if (!step()) return EIO;
        const auto dir = descriptors_.find(directory_fd);
        if (dir == descriptors_.end()) return EBADF;
        node& d = nodes_.at(dir->second.id);
        const auto found = d.entries.find(from);
        if (found == d.entries.end()) return ENOENT;
        const directory_operation op{operation_kind::rename, from, to, found->second};
        apply(d.entries, op);
        d.pending.push_back(op);
        return 0;
    }

    int remove_file(int directory_fd, const std::string& name) override {
        if (!step()) return EIO;
        const auto dir = descriptors_.find(directory_fd);
        if (dir == descriptors_.end()) return EBADF;
        node& d = nodes_.at(dir->second.id);
        const auto found = d.entries.find(name);
        if (found == d.entries.end()) return ENOENT;
        if (nodes_.at(found->second).is_directory) return EISDIR;
        const directory_operation op{operation_kind::remove, name, {}, found->second};
        apply(d.entries, op);
        d.pending.push_back(op);
        return 0;
    }

    int write_at(int fd, byte_view data, std::uint64_t offset) override {
        if (!step()) return EIO;
        node* n = file_of(fd, true);
        if (n == nullptr) return EBADF;
        const auto end = static_cast<std::size_t>(offset) + data.size();
        if (n->bytes.size() < end) n->bytes.resize(end);
        std::copy(data.begin(), data.end(), n->bytes.begin() + static_cast<std::ptrdiff_t>(offset));
        return 0;
    }

    int read_at(int fd, std::span<std::byte> out, std::uint64_t offset, std::size_t& got) override {
        if (powered_off_) return EIO;
        const node* n = file_of(fd, false);
        if (n == nullptr) return EBADF;
        got = 0;
        if (offset >= n->bytes.size()) return 0;
        got = std::min(out.size(), n->bytes.size() - static_cast<std::size_t>(offset));
        std::copy_n(n->bytes.begin() + static_cast<std::ptrdiff_t>(offset), got, out.begin());
        return 0;
    }

    int size_of(int fd, std::uint64_t& size) override {
        if (powered_off_) return EIO;
        const node* n = file_of(fd, false);
        if (n == nullptr) return EBADF;
        size = n->bytes.size();
        return 0;
    }

    int truncate_file(int fd, std::uint64_t size) override {
        if (!step()) return EIO;
        node* n = file_of(fd, true);
        if (n == nullptr) return EBADF;
        n->bytes.resize(static_cast<std::size_t>(size));
        return 0;
    }

    int sync_data(int fd, sync_site site) override { return sync(fd, site); }
    int sync_file(int fd, sync_site site) override { return sync(fd, site); }

    void close(int fd) noexcept override {
        // Descriptors from before a power loss are gone already; numbers are never reused.
        descriptors_.erase(fd);
        std::erase_if(locks_, [fd](const auto& lock) { return lock.second == fd; });
    }

private:
    using node_id = std::uint64_t;
    static constexpr node_id root_id = 0;

    enum class operation_kind { create, remove, rename };

    /// One change of a directory's entries, replayed on the durable entries when a crash
    /// keeps it. `id` is the inode it concerns (a rename moves that inode, whatever the
    /// durable entries hold under `name` by then).
    struct directory_operation {
        operation_kind kind;
        std::string name;
        std::string to;  // rename only
        node_id id = 0;
    };

    struct node {
        bool is_directory = false;
        // A file.
        std::vector<std::byte> bytes;
        std::vector<std::byte> durable_bytes;
        // A directory.
        std::map<std::string, node_id> entries;
        std::map<std::string, node_id> durable_entries;
        std::vector<directory_operation> pending;  // since the last fsync of the directory
    };

    struct descriptor {
        node_id id = 0;
        bool writable = false;
    };

    static std::size_t index(sync_site site) { return static_cast<std::size_t>(site); }

    static void apply(std::map<std::string, node_id>& entries, const directory_operation& op) {
        switch (op.kind) {
            case operation_kind::create: entries[op.name] = op.id; break;
            case operation_kind::remove:
                if (auto it = entries.find(op.name); it != entries.end() && it->second == op.id)
                    entries.erase(it);
                break;
            case operation_kind::rename:
                if (auto it = entries.find(op.name); it != entries.end() && it->second == op.id)
                    entries.erase(it);
                entries[op.to] = op.id;
                break;
        }
    }

    static std::vector<std::string> split(std::string_view path) {
        std::vector<std::string> parts;
        std::size_t at = 0;
        while (at < path.size()) {
            const std::size_t slash = std::min(path.find('/', at), path.size());
            const std::string_view part = path.substr(at, slash - at);
            if (part == "..") {
                if (!parts.empty()) parts.pop_back();
            } else if (!part.empty() && part != ".") {
                parts.emplace_back(part);
            }
            at = slash + 1;
        }
        return parts;
    }

    std::optional<node_id> resolve_parts(const std::vector<std::string>& parts) const {
        node_id at = root_id;
        for (const std::string& part : parts) {
            const node& n = nodes_.at(at);
            if (!n.is_directory) return std::nullopt;
            const auto it = n.entries.find(part);
            if (it == n.entries.end()) return std::nullopt;
            at = it->second;
        }
        return at;
    }

    std::optional<node_id> resolve(const std::string& path) const {
        return resolve_parts(split(path));
    }

    node_id new_node(bool directory) {
        const node_id id = next_node_++;
        nodes_[id].is_directory = directory;
        return id;
    }

    void link(node_id directory, const std::string& name, node_id id) {
        node& d = nodes_.at(directory);
        const directory_operation op{operation_kind::create, name, {}, id};
        apply(d.entries, op);
        d.pending.push_back(op);
    }

    int open_descriptor(node_id id, bool writable) {
        const int fd = next_descriptor_++;
        descriptors_[fd] = descriptor{id, writable};
        return fd;
    }

    node* file_of(int fd, bool for_writing) {
        const auto it = descriptors_.find(fd);
        if (it == descriptors_.end() || (for_writing && !it->second.writable)) return nullptr;
        node& n = nodes_.at(it->second.id);
        return n.is_directory ? nullptr : &n;
    }

    /// Counts an operation that changes the disk; false once the power has failed.
    bool step() {
        if (powered_off_) return false;
        if (countdown_) {
            if (*countdown_ == 0) {
                powered_off_ = true;
                countdown_.reset();
                return false;
            }
            --*countdown_;
        }
        ++stats_.operations;
        return true;
    }

    bool counted_sync_skipped(sync_site site) {
        ++stats_.syncs[index(site)];
        if (!skipped_[index(site)]) return false;
        ++stats_.syncs_skipped[index(site)];
        return true;
    }

    int sync(int fd, sync_site site) {
        if (!step()) return EIO;
        node* n = file_of(fd, false);
        if (n == nullptr) return EBADF;
        if (counted_sync_skipped(site)) return 0;
        n->durable_bytes = n->bytes;
        return 0;
    }

    static double total(const power_loss_weights& w) { return w.keep + w.drop + w.tear; }

    static bool survives(prng& random, const power_loss_weights& w) {
        return random.unit() * total(w) < w.keep;
    }

    /// What the platter holds of file `n` after a crash (see the file comment).
    static std::vector<std::byte> crash_image(const node& n, prng& random,
                                              const power_loss_weights& w) {
        const std::vector<std::byte>& old_bytes = n.durable_bytes;
        const std::vector<std::byte>& new_bytes = n.bytes;
        if (old_bytes == new_bytes) return old_bytes;
        const std::size_t size = new_bytes.size() == old_bytes.size() || survives(random, w)
                                     ? new_bytes.size()
                                     : old_bytes.size();
        // Beyond its current size a shrunk file's blocks still hold the old bytes.
        const auto old_at = [&](std::size_t i) {
            return i < old_bytes.size() ? old_bytes[i] : std::byte{0};
        };
        const auto new_at = [&](std::size_t i) {
            return i < new_bytes.size() ? new_bytes[i] : old_at(i);
        };
        std::vector<std::byte> out(size);
        for (std::size_t page = 0; page < size; page += page_bytes) {
            const std::size_t page_end = std::min(size, page + page_bytes);
            bool dirty = false;
            for (std::size_t i = page; i < page_end && !dirty; ++i) dirty = new_at(i) != old_at(i);
            const double u = random.unit() * total(w);
            const int page_fate = !dirty ? 1 : u < w.keep ? 0 : u < w.keep + w.drop ? 1 : 2;
            for (std::size_t sector = page; sector < page_end; sector += sector_bytes) {
                const std::size_t sector_end = std::min(page_end, sector + sector_bytes);
                int fate = page_fate;  // 0 new, 1 old, 2 garbage
                if (page_fate == 2) {
                    // A sector holding durable bytes is written atomically: old or new.
                    fate = static_cast<int>(random.below(sector >= old_bytes.size() ? 3 : 2));
                }
                for (std::size_t i = sector; i < sector_end; ++i)
                    out[i] = fate == 0   ? new_at(i)
                             : fate == 1 ? old_at(i)
                                         : static_cast<std::byte>(random.next() & 0xff);
            }
        }
        return out;
    }

    /// After a power loss: no descriptor, no lock, and only what the durable entries reach.
    void restart() {
        descriptors_.clear();
        locks_.clear();
        powered_off_ = false;
        countdown_.reset();
        ++stats_.power_losses;
        std::vector<node_id> reachable{root_id};
        std::vector<bool> seen(next_node_, false);
        seen[root_id] = true;
        for (std::size_t i = 0; i < reachable.size(); ++i)
            for (const auto& [name, child] : nodes_.at(reachable[i]).entries)
                if (!seen[child]) {
                    seen[child] = true;
                    reachable.push_back(child);
                }
        std::erase_if(nodes_, [&](const auto& entry) { return !seen[entry.first]; });
    }

    std::map<node_id, node> nodes_;
    node_id next_node_ = root_id + 1;
    std::map<int, descriptor> descriptors_;
    int next_descriptor_ = 3;  // never reused: a stale descriptor closes nothing
    std::map<node_id, int> locks_;
    std::array<bool, sync_site_count> skipped_{};
    std::optional<std::uint64_t> countdown_;
    bool powered_off_ = false;
    durable_image_stats stats_;
};

}  // namespace zab::testing
