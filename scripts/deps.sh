#!/usr/bin/env bash
# Install what building, booting and testing pcshare needs on a fresh
# Debian 12 machine (run as root). The kernel source itself is installed,
# pinned, by scripts/kernel.sh. Quiet and quick when everything is there.
set -euo pipefail
apt_pkgs=(qemu-system-x86 btrfs-progs xfsprogs e2fsprogs fio gcc make flex bison bc
	libelf-dev libssl-dev ccache cpio kmod perl python3 python3-matplotlib strace
	apparmor)
missing=()
for p in "${apt_pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps.sh: installing ${missing[*]}" >&2
	if [ "$(id -u)" != 0 ]; then
		echo "deps.sh: need root to install packages" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
py=${PYTHON:-python3}
if ! "$py" -c 'import pytest' 2>/dev/null; then
	echo "deps.sh: installing pytest for $py" >&2
	"$py" -m pip install -q pytest
fi
