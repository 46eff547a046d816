#!/usr/bin/env bash
# Build fstests and xfs_io, each with the project's patches applied, out of
# tree under $PCSHARE_CACHE (default ~/.cache/pcshare):
#
#   fstests/xfstests   fstests at the pinned commit + userspace/fstests/*.patch
#   xfsprogs/build     Debian 12's xfsprogs + userspace/xfsprogs/*.patch
#   fstests/bin/xfs_io the patched xfs_io (what the guests put first in PATH)
#
# fstests comes from ../shared/vendor (a tarball of the pinned commit) when it
# is there, else from git.  The xfsprogs source is what scripts/fstests-deps.sh
# fetched with apt-get source.  A tree is rebuilt only when its patches
# change.  Needs scripts/fstests-deps.sh to have run.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PCSHARE_CACHE:-$HOME/.cache/pcshare}
COMMIT=63a29724a85f1999e49bf0a9bf0d22643b6116e5
TARBALL=$TOP/../shared/vendor/xfstests-${COMMIT:0:12}.tar.gz
REMOTES=(git://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git
	https://github.com/kdave/xfstests.git)
JOBS=$(nproc)
GIT_ID=(-c user.name="pcshare developers" -c user.email=pcshare@example.org)

patches_sum() {
	cat "$TOP/userspace/$1"/*.patch | sha256sum | cut -d' ' -f1
}

fetch_fstests() {
	local dest=$1
	if [ -f "$TARBALL" ]; then
		mkdir -p "$dest"
		tar xzf "$TARBALL" -C "$dest" --strip-components=1
		git -C "$dest" init -q
		git -C "$dest" add -A -f .
		git -C "$dest" "${GIT_ID[@]}" commit -q -m "fstests ${COMMIT:0:12}"
		return
	fi
	local remote
	for remote in "${REMOTES[@]}"; do
		rm -rf "$dest"
		git init -q "$dest"
		# By commit where the server allows it, else the whole history.
		if { git -C "$dest" fetch -q --depth 1 "$remote" "$COMMIT" ||
			git -C "$dest" fetch -q "$remote" "+refs/heads/*:refs/remotes/origin/*"; } &&
			git -C "$dest" checkout -q "$COMMIT"; then
			return
		fi
		echo "fstests-build.sh: cannot fetch $COMMIT from $remote" >&2
	done
	exit 1
}

# fstests
src=$CACHE/fstests/xfstests
sum=$(patches_sum fstests)
if [ "$(cat "$src/.pcshare-patches" 2>/dev/null)" != "$sum" ]; then
	echo "fstests-build.sh: fstests ${COMMIT:0:12} + userspace/fstests -> $src" >&2
	rm -rf "$src"
	fetch_fstests "$src"
	# The cover letter carries no diff; git am skips nothing, so leave it out.
	git -C "$src" "${GIT_ID[@]}" am -q \
		$(ls "$TOP"/userspace/fstests/*.patch | grep -v /0000-cover-letter)
	make -C "$src" -j"$JOBS" >"$CACHE/fstests/build.log" 2>&1 ||
		{ tail -n 30 "$CACHE/fstests/build.log" >&2; exit 1; }
	echo "$sum" >"$src/.pcshare-patches"
fi

# xfs_io
xsrc=$(ls -d "$CACHE"/xfsprogs/xfsprogs-*/ | head -n 1)
build=$CACHE/xfsprogs/build
sum=$(patches_sum xfsprogs)
if [ "$(cat "$build/.pcshare-patches" 2>/dev/null)" != "$sum" ]; then
	echo "fstests-build.sh: $(basename "$xsrc") + userspace/xfsprogs -> $build" >&2
	rm -rf "$build"
	cp -a "$xsrc" "$build"
	for p in $(ls "$TOP"/userspace/xfsprogs/*.patch | grep -v /0000-cover-letter); do
		patch -d "$build" -p1 --quiet --forward <"$p"
	done
	(cd "$build" && ./configure --quiet && make -j"$JOBS" include libfrog libxcmd io) \
		>"$CACHE/xfsprogs/build.log" 2>&1 ||
		{ tail -n 30 "$CACHE/xfsprogs/build.log" >&2; exit 1; }
	echo "$sum" >"$build/.pcshare-patches"
fi
mkdir -p "$CACHE/fstests/bin"
ln -sf "$build/io/xfs_io" "$CACHE/fstests/bin/xfs_io"
"$CACHE/fstests/bin/xfs_io" -c "help reflink" | grep -q -- "-b budget_ms" ||
	{ echo "fstests-build.sh: $build/io/xfs_io lacks reflink -b" >&2; exit 1; }
echo "fstests-build.sh: fstests in $src, xfs_io in $CACHE/fstests/bin" >&2
