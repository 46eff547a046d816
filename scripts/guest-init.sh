#!/bin/sh
# PID 1 of a pcshare guest. The root is the host's / over 9p, read-only;
# harness/vm.py shares a run directory as the 9p tag "out" holding job.sh.
# Runs job.sh, records its exit status, and reboots (QEMU runs with
# -no-reboot, so that ends the VM).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# /tmp stays the host's (read-only): the checkout may live there. Scratch
# space is a tmpfs on /run.
export HOME=/run/home TMPDIR=/run/tmp PYTHONDONTWRITEBYTECODE=1 TERM=dumb LANG=C.UTF-8

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /dev/shm /dev/pts /run/home /run/tmp /run/pcshare/out
chmod 1777 /run/tmp
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t devpts devpts /dev/pts
mount -t debugfs debugfs /sys/kernel/debug
# AppArmor policy for the LSM tests (a kernel without it has no securityfs).
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
ln -sf /proc/self/fd /dev/fd 2>/dev/null
# Every per-test marker the suites write to /dev/kmsg, not 10 per 5 s.
echo on >/proc/sys/kernel/printk_devkmsg
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /run/pcshare/out ||
	! cd /run/pcshare/out; then
	# no exit status gets written, so the host reports the run as failed
	echo "pcshare-guest: cannot mount the out share"
	echo b >/proc/sysrq-trigger
fi
echo "pcshare-guest: running job on $(uname -r), $(nproc) CPUs"
sh ./job.sh </dev/null
status=$?
echo "$status" >/run/pcshare/out/exit-status
dmesg >/run/pcshare/out/dmesg.txt 2>/dev/null
sync
echo "pcshare-guest: job exited with status $status"
echo b >/proc/sysrq-trigger
sleep 60
