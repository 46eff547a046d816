#!/bin/sh
# Runs inside a pcshare guest (scripts/fstests.py boots it): fstests' check
# on each filesystem in $FSTESTS_FS, TEST_DEV /dev/vda, SCRATCH_DEV /dev/vdb.
#
#   FSTESTS_DIR     the built fstests tree (read-only here: the host's / over 9p)
#   FSTESTS_XFS_IO  directory holding the xfs_io fstests must use (first in PATH)
#   FSTESTS_TESTS   the tests to run (fstests names: generic/788 ...)
#   FSTESTS_TIMEOUT seconds each filesystem's check may take
#   PCSHARE_OUT     the run directory; results go to $PCSHARE_OUT/results/FS
set -u
out=$PCSHARE_OUT
# fstests keeps its temporary files in /tmp, which is the host's and
# read-only here; mount points and results go to writable places.
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /run/fstests/test /run/fstests/scratch
export PATH="$FSTESTS_XFS_IO:$PATH"
echo "fstests-guest: xfs_io is $(command -v xfs_io)"
xfs_io -c "help reflink" | grep -q -- "-b budget_ms" ||
	echo "fstests-guest: WARNING: this xfs_io cannot issue FICLONERANGE2"
cd "$FSTESTS_DIR" || exit 1
status=0
for fs in $FSTESTS_FS; do
	echo "fstests-guest: $fs on $(uname -r)"
	case $fs in
	xfs) mkfs.xfs -f -q /dev/vda ;;
	btrfs) mkfs.btrfs -f -q /dev/vda >/dev/null ;;
	*) mkfs -t "$fs" /dev/vda ;;
	esac || { status=1; continue; }
	mkdir -p "$out/results/$fs"
	# generic tests and this filesystem's own
	tests=$(for t in $FSTESTS_TESTS; do
		case $t in generic/* | "$fs"/*) echo "$t" ;; esac
	done)
	# SIGKILL a minute after SIGTERM: check traps TERM to clean up.
	env FSTYP="$fs" TEST_DEV=/dev/vda TEST_DIR=/run/fstests/test \
		SCRATCH_DEV=/dev/vdb SCRATCH_MNT=/run/fstests/scratch \
		RESULT_BASE="$out/results/$fs" \
		timeout -k 60 "$FSTESTS_TIMEOUT" ./check -R xunit $tests \
		>"$out/results/$fs/check.log" 2>&1
	rc=$?
	tail -n 5 "$out/results/$fs/check.log"
	echo "fstests-guest: $fs check exited $rc"
	[ $rc -eq 124 ] && status=1
	umount /run/fstests/test /run/fstests/scratch 2>/dev/null
done
exit $status
