"""bench/lockstat_guest.py reads /proc/lock_stat as the kernel writes it
(kernel/locking/lockdep_proc.c: seq_header(), seq_stats())."""
from bench.lockstat_guest import most_contended, parse_lock_stat


def stats_line(name, contentions, wait_total, acquisitions, hold_total):
    """One class line: %40s: then con-bounces, the wait times, acq-bounces,
    the hold times, as seq_stats() and seq_lock_time() print them."""
    wait = f"{contentions:14d} {0.12:14.2f} {9.5:14.2f} {wait_total:14.2f} {1.0:14.2f}"
    hold = f"{acquisitions:14d} {0.05:14.2f} {20.0:14.2f} {hold_total:14.2f} {0.3:14.2f}"
    return f"{name + ':':>41}{3:14d} {wait} {7:14d} {hold}"


def point(name, count, symbol):
    return f"{name:>40} {count:14d} {'[<000000001a2b3c4d>]':>29} {symbol}"


SAMPLE = "\n".join([
    "lock_stat version 0.4",
    "-" * 221,
    f"{'class name':>40} {'con-bounces':>14} {'contentions':>14} ...",
    "-" * 221,
    "",
    stats_line("&xa->xa_lock#9", 42, 310.25, 90000, 5000.5),
    "-" * 16,
    point("&xa->xa_lock#9", 30, "__filemap_add_folio+0x1c2/0x5a0"),
    point("&xa->xa_lock#9", 12, "__folio_end_writeback+0x4d/0x2b0"),
    "-" * 16,
    point("&xa->xa_lock#9", 40, "__filemap_add_folio+0x1c2/0x5a0"),
    "",
    "." * 221,
    "",
    stats_line("&mapping->i_mmap_rwsem-W", 0, 0, 12, 3.0),
    stats_line("&mapping->i_mmap_rwsem-R", 2, 1.5, 80, 9.0),
    "-" * 16,
    point("&mapping->i_mmap_rwsem", 2, "rmap_walk_file+0x1f/0x40"),
    stats_line("rcu_node_0", 0, 0, 500, 40.0),
    # Waited for but never released yet: lists, no class line.
    "-" * 16,
    point("&sb->s_type->i_lock_key#3", 4, "iput+0x10/0x200"),
    "",
])


def test_every_class_line_is_read_with_its_contention_points():
    classes = {c["class"]: c for c in parse_lock_stat(SAMPLE)}
    assert list(classes) == ["&xa->xa_lock#9", "&mapping->i_mmap_rwsem-W",
                             "&mapping->i_mmap_rwsem-R", "rcu_node_0"]
    xa = classes["&xa->xa_lock#9"]
    assert (xa["contentions"], xa["con_bounces"], xa["acquisitions"]) == (42, 3, 90000)
    assert (xa["wait_total_us"], xa["wait_max_us"], xa["hold_total_us"]) == (310.25, 9.5, 5000.5)
    # Where it waited, then where the holder took it, by symbol.
    assert xa["waited_in"] == {"__filemap_add_folio": 30, "__folio_end_writeback": 12}
    assert xa["holder_in"] == {"__filemap_add_folio": 40}
    rwsem = classes["&mapping->i_mmap_rwsem-R"]
    assert (rwsem["waited_in"], rwsem["holder_in"]) == ({"rmap_walk_file": 2}, {})
    assert classes["rcu_node_0"]["waited_in"] == classes["rcu_node_0"]["holder_in"] == {}


def test_most_contended_keeps_classes_that_waited_most_first():
    top = most_contended(parse_lock_stat(SAMPLE), 5)
    assert [c["class"] for c in top] == ["&xa->xa_lock#9", "&mapping->i_mmap_rwsem-R"]
    assert [c["class"] for c in most_contended(parse_lock_stat(SAMPLE), 1)] == ["&xa->xa_lock#9"]
