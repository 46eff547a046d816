#!/usr/bin/env bash
# What `make fstests` needs on a fresh Debian 12 machine (run as root):
# fstests' build and run dependencies, the xfsprogs source package and its
# build dependencies (for the patched xfs_io), and the users and groups
# fstests runs as. Quiet and quick when everything is there.
#
# The xfsprogs source is unpacked into $PCSHARE_CACHE/xfsprogs (outside the
# checkout); nothing here writes into the repository.
set -euo pipefail
CACHE=${PCSHARE_CACHE:-$HOME/.cache/pcshare}

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "fstests-deps.sh: need root to $1" >&2
		exit 1
	fi
}

# fstests' README (Debian section) minus lvm2 and kernel headers, plus
# xfslibs-dev, and dpkg-dev for apt-get source.
apt_pkgs=(acl attr automake bc dbench dump e2fsprogs fio gawk gcc git indent
	libacl1-dev libaio-dev libcap-dev libgdbm-dev libgdbm-compat-dev libtool
	libtool-bin liburing-dev libuuid1 make psmisc python3 quota sed uuid-dev
	uuid-runtime xfsprogs xfslibs-dev btrfs-progs sqlite3 dpkg-dev
	qemu-system-x86)
missing=()
for p in "${apt_pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
updated=
apt_update() {
	[ -n "$updated" ] || apt-get update -qq
	updated=1
}
if [ ${#missing[@]} -gt 0 ]; then
	need_root "install ${missing[*]}"
	echo "fstests-deps.sh: installing ${missing[*]}" >&2
	apt_update
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# deb-src for bookworm, so that apt-get source/build-dep find xfsprogs.
"$(dirname "$0")"/deb-src.sh xfsprogs

# xfsprogs' build dependencies (the stamp remembers a successful build-dep).
stamp=$CACHE/xfsprogs/.build-dep-done
if [ ! -e "$stamp" ]; then
	need_root "install xfsprogs' build dependencies"
	apt_update
	DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq xfsprogs >/dev/null
	mkdir -p "$CACHE/xfsprogs"
	touch "$stamp"
fi

# The source package, outside the repository.
if ! ls -d "$CACHE"/xfsprogs/xfsprogs-*/ >/dev/null 2>&1; then
	apt_update
	mkdir -p "$CACHE/xfsprogs"
	(cd "$CACHE/xfsprogs" && apt-get source -qq xfsprogs >/dev/null)
fi

# fstests runs some tests as fsgqa (and 123456-fsgqa); the guest's root is
# this machine's / read-only, so the users are made here.
for g in fsgqa 123456-fsgqa; do
	getent group "$g" >/dev/null || { need_root "add group $g"; groupadd "$g"; }
done
getent passwd fsgqa >/dev/null ||
	{ need_root "add user fsgqa"; useradd -m -g fsgqa fsgqa; }
getent passwd 123456-fsgqa >/dev/null ||
	{ need_root "add user 123456-fsgqa"; useradd -m -g 123456-fsgqa 123456-fsgqa; }
getent passwd fsgqa2 >/dev/null ||
	{ need_root "add user fsgqa2"; useradd -m -U fsgqa2; }
exit 0
