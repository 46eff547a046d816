#!/usr/bin/env bash
# Let apt see Debian 12's source packages (apt-get source, build-dep), for
# scripts/coreutils.sh and scripts/fstests-deps.sh: add a bookworm deb-src
# entry if there is none, and refresh apt's index when it was added or when
# PKG (optionally PKG=VERSION), if given, is not listed yet. Quiet when
# nothing is needed; root only to change something.
#
#   scripts/deb-src.sh [PKG[=VERSION]]
set -euo pipefail
want=${1:-}
die() { echo "deb-src.sh: $*" >&2; exit 1; }

listed() {
	local pkg=${want%%=*} version=
	[ -n "$want" ] || return 0
	[ "$pkg" = "$want" ] || version=${want#*=}
	if [ -n "$version" ]; then
		apt-cache showsrc "$pkg" 2>/dev/null | grep -qx "Version: $version"
	else
		apt-cache showsrc "$pkg" 2>/dev/null | grep -q "^Version: "
	fi
}

added=
if ! grep -rqsE '^(deb-src .*bookworm|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	[ "$(id -u)" = 0 ] || die "need root to add a deb-src source for bookworm"
	echo "deb-src.sh: adding /etc/apt/sources.list.d/pcshare-deb-src.sources" >&2
	cat >/etc/apt/sources.list.d/pcshare-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	added=1
fi
if [ -n "$added" ] || ! listed; then
	[ "$(id -u)" = 0 ] || die "need root to refresh apt's index"
	apt-get update -qq
fi
