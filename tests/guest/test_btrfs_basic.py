"""btrfs basics on every kernel: data written is data read, by every way
btrfs files come to share extents, across cache drops and remounts."""
import errno
import os

import pytest

from harness import fsutil
from harness.fsutil import sha256, sha256_file

MiB = 1 << 20


def remount_cold(mnt, device):
    options = ["-o", "shared_cache"] if "shared_cache" in fsutil.mount_options(mnt) else []
    fsutil.run("umount", str(mnt))
    fsutil.drop_caches()
    fsutil.run("mount", *options, device, str(mnt))


@pytest.mark.parametrize("size", [4096, 3 * MiB + 123])
def test_write_read_back(btrfs, scratch_dev, size):
    data = fsutil.pattern(size, "basic")
    fsutil.write_file(btrfs / "f", data)
    assert sha256_file(btrfs / "f") == sha256(data)
    remount_cold(btrfs, scratch_dev)
    assert sha256_file(btrfs / "f") == sha256(data)
    assert sha256_file(btrfs / "f", direct=size % 4096 == 0) == sha256(data)


@pytest.mark.parametrize("sync", [True, False])
def test_ficlone_shares_extents_and_unshares_on_write(btrfs, scratch_dev, sync):
    data = fsutil.pattern(8 * MiB, "clone")
    fsutil.write_file(btrfs / "src", data, sync=sync)
    with open(btrfs / "src", "rb") as s, open(btrfs / "dst", "wb") as d:
        fsutil.ficlone(s.fileno(), d.fileno())
    src_map = fsutil.physical_map(btrfs / "src")
    assert src_map and src_map == fsutil.physical_map(btrfs / "dst")
    with open(btrfs / "dst", "rb") as d:
        assert all(flags & fsutil.FIEMAP_EXTENT_SHARED for *_, flags in fsutil.fiemap(d.fileno()))
    assert sha256_file(btrfs / "dst") == sha256(data)

    patch = fsutil.pattern(4096, "patch")
    with open(btrfs / "dst", "r+b") as d:
        d.seek(MiB)
        d.write(patch)
    expected_dst = data[:MiB] + patch + data[MiB + 4096:]
    remount_cold(btrfs, scratch_dev)
    assert sha256_file(btrfs / "src") == sha256(data)
    assert sha256_file(btrfs / "dst") == sha256(expected_dst)


def test_ficlonerange_assembles_file(btrfs, scratch_dev):
    a = fsutil.pattern(4 * MiB, "a")
    b = fsutil.pattern(4 * MiB, "b")
    fsutil.write_file(btrfs / "a", a)
    fsutil.write_file(btrfs / "b", b)
    with open(btrfs / "a", "rb") as fa, open(btrfs / "b", "rb") as fb, \
            open(btrfs / "out", "wb") as out:
        fsutil.ficlonerange(fa.fileno(), out.fileno(), MiB, 2 * MiB, 0)
        fsutil.ficlonerange(fb.fileno(), out.fileno(), 0, MiB, 2 * MiB)
        fsutil.ficlonerange(fa.fileno(), out.fileno(), 0, 0, 3 * MiB)  # 0 = to EOF
    expected = a[MiB:3 * MiB] + b[:MiB] + a
    assert os.path.getsize(btrfs / "out") == len(expected)
    assert sha256_file(btrfs / "out") == sha256(expected)
    remount_cold(btrfs, scratch_dev)
    assert sha256_file(btrfs / "out") == sha256(expected)


def test_ficlonerange_rejects_unaligned_range(btrfs):
    fsutil.write_file(btrfs / "a", fsutil.pattern(MiB, "a"))
    with open(btrfs / "a", "rb") as fa, open(btrfs / "out", "wb") as out:
        with pytest.raises(OSError) as err:
            fsutil.ficlonerange(fa.fileno(), out.fileno(), 100, 4096, 0)
        assert err.value.errno == errno.EINVAL


def test_copy_file_range_reflinks(btrfs, scratch_dev):
    data = fsutil.pattern(6 * MiB, "cfr")
    fsutil.write_file(btrfs / "src", data)
    with open(btrfs / "src", "rb") as s, open(btrfs / "dst", "wb") as d:
        copied = 0
        while copied < len(data):
            n = os.copy_file_range(s.fileno(), d.fileno(), len(data) - copied)
            assert n > 0
            copied += n
    os.sync()
    assert fsutil.physical_map(btrfs / "src") == fsutil.physical_map(btrfs / "dst")
    remount_cold(btrfs, scratch_dev)
    assert sha256_file(btrfs / "dst") == sha256(data)


def test_fideduperange(btrfs, scratch_dev):
    data = fsutil.pattern(4 * MiB, "dedupe")
    other = fsutil.pattern(4 * MiB, "other")
    for name, content in (("one", data), ("two", data), ("three", other)):
        fsutil.write_file(btrfs / name, content)
    assert fsutil.physical_map(btrfs / "one") != fsutil.physical_map(btrfs / "two")
    with open(btrfs / "one", "rb") as one, open(btrfs / "two", "r+b") as two, \
            open(btrfs / "three", "r+b") as three:
        results = fsutil.fideduperange(one.fileno(), 0, len(data),
                                       [(two.fileno(), 0), (three.fileno(), 0)])
    assert results[0] == (len(data), fsutil.FILE_DEDUPE_RANGE_SAME)
    assert results[1][1] == fsutil.FILE_DEDUPE_RANGE_DIFFERS
    os.sync()
    assert fsutil.physical_map(btrfs / "one") == fsutil.physical_map(btrfs / "two")
    remount_cold(btrfs, scratch_dev)
    assert sha256_file(btrfs / "two") == sha256(data)
    assert sha256_file(btrfs / "three") == sha256(other)


def test_subvolume_snapshots(btrfs, scratch_dev):
    fsutil.run("btrfs", "subvolume", "create", str(btrfs / "vol"))
    data = fsutil.pattern(5 * MiB, "vol")
    fsutil.write_file(btrfs / "vol/f", data)
    fsutil.run("btrfs", "subvolume", "snapshot", "-r", str(btrfs / "vol"), str(btrfs / "ro"))
    fsutil.run("btrfs", "subvolume", "snapshot", str(btrfs / "vol"), str(btrfs / "rw"))
    assert fsutil.physical_map(btrfs / "vol/f") == fsutil.physical_map(btrfs / "rw/f")

    with pytest.raises(OSError) as err:
        open(btrfs / "ro/f", "r+b")
    assert err.value.errno == errno.EROFS
    patch = fsutil.pattern(8192, "snap-patch")
    with open(btrfs / "rw/f", "r+b") as f:
        f.seek(4096)
        f.write(patch)
    remount_cold(btrfs, scratch_dev)
    assert sha256_file(btrfs / "vol/f") == sha256(data)
    assert sha256_file(btrfs / "ro/f") == sha256(data)
    assert sha256_file(btrfs / "rw/f") == sha256(data[:4096] + patch + data[4096 + 8192:])


def test_remount_ro_rw(btrfs):
    data = fsutil.pattern(2 * MiB, "remount")
    fsutil.write_file(btrfs / "f", data, sync=False)
    fsutil.run("mount", "-o", "remount,ro", str(btrfs))
    with pytest.raises(OSError) as err:
        open(btrfs / "g", "wb")
    assert err.value.errno == errno.EROFS
    assert sha256_file(btrfs / "f") == sha256(data)
    fsutil.run("mount", "-o", "remount,rw", str(btrfs))
    fsutil.write_file(btrfs / "g", data)
    fsutil.drop_caches()
    assert sha256_file(btrfs / "g") == sha256(data)


def test_xfs_ficlone(xfs, scratch_dev):
    data = fsutil.pattern(4 * MiB, "xfs")
    fsutil.write_file(xfs / "src", data)
    with open(xfs / "src", "rb") as s, open(xfs / "dst", "wb") as d:
        fsutil.ficlone(s.fileno(), d.fileno())
    assert fsutil.physical_map(xfs / "src") == fsutil.physical_map(xfs / "dst")
    remount_cold(xfs, scratch_dev)
    assert sha256_file(xfs / "dst") == sha256(data)
