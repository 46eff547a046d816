#!/usr/bin/env bash
# Build GNU cp with pcshare's patches (userspace/coreutils/0*.patch: cp
# --reflink through FICLONERANGE2) out of tree, from Debian 12's coreutils
# source, under $PCSHARE_CACHE/coreutils; print the built binary's path.
# (userspace/coreutils/README.md says more.)
#
#   scripts/coreutils.sh build   fetch, patch, configure, make src/cp (default)
#   scripts/coreutils.sh deps    only the apt build dependencies (run as root)
#   scripts/coreutils.sh path    print where the binary is (built or not)
#
# Quick when nothing changed; a changed patch set starts from fresh source.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PCSHARE_CACHE:-$HOME/.cache/pcshare}
DIR=$CACHE/coreutils
VERSION=9.1-1		# bookworm's; the patches are made against it
SRC=$DIR/coreutils-${VERSION%-*}
BUILD=$DIR/build
PATCHES=()
for p in "$TOP"/userspace/coreutils/0*.patch; do
	case $p in *0000-cover-letter.patch) ;; *) PATCHES+=("$p") ;; esac
done

die() { echo "coreutils.sh: $*" >&2; exit 1; }

deps() {
	"$TOP"/scripts/deb-src.sh "coreutils=$VERSION"
	if apt-get -s build-dep coreutils 2>/dev/null | grep -q '^Inst ' ||
	   ! command -v dpkg-source >/dev/null; then
		[ "$(id -u)" = 0 ] || die "need root to install coreutils' build dependencies"
		echo "coreutils.sh: installing coreutils' build dependencies" >&2
		DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq coreutils >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev patch >/dev/null
	fi
}

build() {
	deps
	local stamp
	stamp=$(cat "${PATCHES[@]}" | sha256sum | cut -c1-16)
	if [ "$(cat "$DIR/patched" 2>/dev/null)" != "$stamp" ]; then
		echo "coreutils.sh: fetching coreutils $VERSION and applying ${#PATCHES[@]} patch files" >&2
		rm -rf "$DIR" && mkdir -p "$DIR"
		(cd "$DIR" && apt-get source -qq "coreutils=$VERSION" >/dev/null 2>&1) ||
			die "apt-get source coreutils=$VERSION failed"
		for p in "${PATCHES[@]}"; do
			patch -d "$SRC" -p1 --quiet --no-backup-if-mismatch < "$p"
		done
		echo "$stamp" > "$DIR/patched"
	fi
	mkdir -p "$BUILD"
	if [ ! -f "$BUILD/Makefile" ]; then
		echo "coreutils.sh: configuring in $BUILD" >&2
		(cd "$BUILD" && FORCE_UNSAFE_CONFIGURE=1 "$SRC/configure" --quiet --disable-nls \
			> configure.log 2>&1) || die "configure failed: $BUILD/configure.log"
	fi
	# gnulib's generated headers (BUILT_SOURCES) first: only "make all" makes them.
	printf 'pcshare-built-sources: $(BUILT_SOURCES)\n' > "$BUILD/built-sources.mk"
	make -s -C "$BUILD" -j"$(nproc)" -f Makefile -f built-sources.mk pcshare-built-sources \
		> "$BUILD/make.log" 2>&1 &&
	make -s -C "$BUILD" -j"$(nproc)" src/cp >> "$BUILD/make.log" 2>&1 ||
		die "make failed: $BUILD/make.log"
	echo "$BUILD/src/cp"
}

case ${1:-build} in
build) build ;;
deps) deps ;;
path) echo "$BUILD/src/cp" ;;
*) die "usage: $0 [build|deps|path]" ;;
esac
