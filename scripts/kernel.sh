#!/usr/bin/env bash
# Kernel source trees and builds for pcshare.
#
# Everything big lives in the cache directory ($PCSHARE_CACHE, default
# ~/.cache/pcshare), never in the checkout:
#   stock/src            git repo: Debian's linux-source-6.12, one baseline
#                        commit tagged pcshare-base; the stock kernel's source
#   pcshare/src          git worktree: pcshare-base + kernel/series (git am)
#   <kernel>/build-<variant>   out-of-tree build directories (incremental)
#   ccache/              compiler cache shared by both kernels
# The two kernels' build dirs sit at the same relative distance from their
# sources, so ccache serves the stock objects to the pcshare build.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${PCSHARE_CACHE:-$HOME/.cache/pcshare}
tarball=/usr/src/linux-source-6.12.tar.xz
want_ver=$(grep -v '^#' "$top/kernel/version" | head -n1)
git_id=(-c user.name=pcshare -c user.email=pcshare@localhost -c advice.detachedHead=false)

usage() {
	cat <<EOF
usage: scripts/kernel.sh COMMAND [ARGS]

  source                 install and unpack the pinned kernel source ($want_ver)
  tree KERNEL            make KERNEL's source tree current (stock | pcshare)
  dev-tree [DIR]         make a development work tree: baseline + series
                         applied as commits on branch 'dev' (default DIR:
                         \$PCSHARE_CACHE/dev)
  export [DIR]           write DIR's commits since the baseline back to
                         kernel/patches/ and kernel/series
  build KERNEL VARIANT   build bzImage (VARIANT: default | debug | lockstat);
                         prints its path
  bzimage KERNEL VARIANT print the bzImage path (no build)
  series-hash            print the hash of kernel/series and its patches, as
                         stamped in the pcshare tree and results files
  check-patches          run checkpatch.pl --strict on every patch in the series
                         (allowed findings: kernel/checkpatch-exceptions)
  check-series           build the kernel after every patch of the series
                         (in \$PCSHARE_CACHE/check; minutes per patch)

Environment: PCSHARE_CACHE (cache directory), PCSHARE_ALLOW_OTHER_KVER=1
(accept a linux-source-6.12 version other than kernel/version pins),
PCSHARE_SRC_pcshare=DIR (build the pcshare kernel from DIR, e.g. a dev tree).
EOF
}

die() { echo "kernel.sh: $*" >&2; exit 1; }
log() { echo "kernel.sh: $*" >&2; }

installed_ver() { dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || true; }

ensure_package() {
	local have
	have=$(installed_ver)
	if [ "$have" != "$want_ver" ]; then
		if [ -z "$have" ] || [ "${PCSHARE_ALLOW_OTHER_KVER:-0}" != 1 ]; then
			log "installing linux-source-6.12=$want_ver"
			if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				"linux-source-6.12=$want_ver" >&2; then
				apt-get update -qq >&2
				DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
					"linux-source-6.12=$want_ver" >&2 ||
					die "linux-source-6.12=$want_ver is not available from apt (candidate: $(apt-cache policy linux-source-6.12 | awk '/Candidate/ {print $2}')). Try the series on it with PCSHARE_ALLOW_OTHER_KVER=1, or pin the new version in kernel/version."
			fi
		else
			log "WARNING: using linux-source-6.12 $have, not the pinned $want_ver (PCSHARE_ALLOW_OTHER_KVER=1)"
		fi
	fi
	[ -f "$tarball" ] || die "$tarball missing after installing linux-source-6.12"
}

cmd_source() {
	local base=$cache/stock/src ver
	ensure_package
	ver=$(installed_ver)
	if [ -f "$base/.git/pcshare-version" ] && [ "$(cat "$base/.git/pcshare-version")" = "$ver" ]; then
		return 0
	fi
	log "unpacking linux-source-6.12 $ver into $base (one time, a few minutes)"
	rm -rf "$cache/stock/src" "$cache/pcshare/src" "$cache/check" "$cache/stock/build-"* "$cache/pcshare/build-"*
	mkdir -p "$cache/stock"
	local tmp=$cache/stock/unpack.$$
	rm -rf "$tmp"
	mkdir -p "$tmp"
	tar -xJf "$tarball" -C "$tmp"
	mv "$tmp"/linux-source-6.12 "$base"
	rmdir "$tmp"
	# Debian's .gitignore ignores every top-level entry (its packaging repo
	# holds no kernel source); drop that rule so new files show up in git.
	sed -i '/^# Debian packaging: ignore everything/,$d' "$base/.gitignore"
	git -C "$base" init -q
	git -C "$base" add -A
	git "${git_id[@]}" -C "$base" commit -q -m "baseline: Debian linux-source-6.12 $ver" \
		-m "Debian's top-level ignore-everything .gitignore rule removed."
	git -C "$base" tag -f pcshare-base >/dev/null
	git -C "$base" gc --auto -q || true
	echo "$ver" >"$base/.git/pcshare-version"
}

series_patches() {
	{ grep -v -e '^#' -e '^[[:space:]]*$' "$top/kernel/series" || true; } | while read -r p; do
		[ -f "$top/kernel/patches/$p" ] || die "kernel/series names $p, which is not in kernel/patches/"
		echo "$top/kernel/patches/$p"
	done
}

series_hash() {
	{ cat "$top/kernel/series"; series_patches | xargs -r cat; } | sha256sum | cut -d' ' -f1
}

# Apply the series to work tree $1, which must sit at pcshare-base.
apply_series() {
	local wt=$1 p
	for p in $(series_patches); do
		git "${git_id[@]}" -C "$wt" am -q --3way "$p" ||
			{ git -C "$wt" am --abort || true; die "patch $(basename "$p") does not apply"; }
	done
}

cmd_tree() {
	local k=$1 base=$cache/stock/src
	cmd_source
	[ "$k" = stock ] && return 0
	[ "$k" = pcshare ] || die "unknown kernel '$k' (stock | pcshare)"
	local wt=$cache/pcshare/src h
	h=$(series_hash)
	if [ ! -d "$wt" ]; then
		mkdir -p "$cache/pcshare"
		git -C "$base" worktree prune
		git "${git_id[@]}" -C "$base" worktree add -q --detach "$wt" pcshare-base
	fi
	if [ "$(cat "$wt/.pcshare-series" 2>/dev/null)" != "$h" ]; then
		log "applying kernel/series to $wt"
		git -C "$wt" am --abort >/dev/null 2>&1 || true
		# checkout rewrites only files that differ, so the build stays incremental
		git "${git_id[@]}" -C "$wt" checkout -q --force --detach pcshare-base
		git -C "$wt" clean -qfdx -e .pcshare-series
		apply_series "$wt"
		echo "$h" >"$wt/.pcshare-series"
	fi
}

cmd_dev_tree() {
	local dir=${1:-$cache/dev} base=$cache/stock/src
	cmd_source
	[ -e "$dir" ] && die "$dir exists; export it or remove it first"
	git "${git_id[@]}" -C "$base" worktree add -q -B dev "$dir" pcshare-base
	apply_series "$dir"
	log "development tree ready: $dir (branch dev; commit there, then: make export-patches DEV=$dir)"
	echo "$dir"
}

# The stack is two series for two trees: the btrfs shared extent cache
# (btrfs tree), then FICLONERANGE2 (VFS tree: the ioctl, with the XFS and
# btrfs opt-ins).  A commit whose subject names FICLONERANGE2 belongs to the
# second; each series gets a cover letter from kernel/cover/<series>.txt
# (subject line, blank line, body).
vfs_series_re=FICLONERANGE2
series_names=(btrfs ficlonerange2)

# Rewrite format-patch's cover letter placeholders with kernel/cover/$2.txt.
fill_cover() {
	local cover=$1 text=$top/kernel/cover/$2.txt
	[ -f "$text" ] || die "missing $text"
	python3 - "$cover" "$text" <<'PY'
import sys
cover, text = sys.argv[1:]
subject, _, body = open(text).read().partition("\n\n")
s = open(cover).read()
assert "*** SUBJECT HERE ***" in s and "*** BLURB HERE ***" in s, cover
s = s.replace("*** SUBJECT HERE ***", subject.strip()).replace("*** BLURB HERE ***", body.rstrip())
open(cover, "w").write(s)
PY
}

cmd_export() {
	local dir=${1:-$cache/dev} c subject seen_vfs=0 parent tree idx
	local -a btrfs=() vfs=()
	[ -d "$dir" ] || die "no development tree at $dir"
	git -C "$dir" diff --quiet HEAD || die "$dir has uncommitted changes; commit them first"
	for c in $(git -C "$dir" rev-list --reverse pcshare-base..HEAD); do
		subject=$(git -C "$dir" log -1 --format=%s "$c")
		if [[ $subject == *$vfs_series_re* ]]; then
			vfs+=("$c")
			seen_vfs=1
		else
			[ $seen_vfs = 0 ] || die "'$subject' comes after a FICLONERANGE2 patch; the btrfs series must come first"
			btrfs+=("$c")
		fi
	done
	# The VFS series goes to another tree: it must apply to the pinned tree
	# on its own.  Rebuild its commits on pcshare-base in a scratch index.
	idx=$(mktemp)
	parent=$(git -C "$dir" rev-parse pcshare-base)
	GIT_INDEX_FILE=$idx git -C "$dir" read-tree pcshare-base
	for c in "${vfs[@]}"; do
		git -C "$dir" format-patch -1 --stdout "$c" | GIT_INDEX_FILE=$idx git -C "$dir" apply --cached - ||
			die "$(git -C "$dir" log -1 --format=%s "$c"): does not apply to pcshare-base without the btrfs series"
		tree=$(GIT_INDEX_FILE=$idx git -C "$dir" write-tree)
		parent=$(git -C "$dir" log -1 --format=%B "$c" |
			GIT_AUTHOR_NAME=$(git -C "$dir" log -1 --format=%an "$c") \
			GIT_AUTHOR_EMAIL=$(git -C "$dir" log -1 --format=%ae "$c") \
			GIT_AUTHOR_DATE=$(git -C "$dir" log -1 --format=%aD "$c") \
			git "${git_id[@]}" -C "$dir" commit-tree "$tree" -p "$parent")
	done
	rm -f "$idx"
	rm -rf "$top"/kernel/patches
	mkdir -p "$top"/kernel/patches
	git -C "$dir" format-patch -q --no-signature --zero-commit --cover-letter \
		--base=pcshare-base -o "$top/kernel/patches/btrfs" "pcshare-base..${btrfs[-1]}"
	git -C "$dir" format-patch -q --no-signature --zero-commit --cover-letter \
		--base=pcshare-base -o "$top/kernel/patches/ficlonerange2" "pcshare-base..$parent"
	fill_cover "$top"/kernel/patches/btrfs/0000-cover-letter.patch btrfs
	fill_cover "$top"/kernel/patches/ficlonerange2/0000-cover-letter.patch ficlonerange2
	{
		echo "# Applied in this order to pcshare-base. Two series, each with a cover"
		echo "# letter (not applied): btrfs/ for the btrfs tree, ficlonerange2/ for VFS."
		(cd "$top/kernel/patches" && ls -1 btrfs/*.patch ficlonerange2/*.patch | grep -v /0000-cover-letter)
	} >"$top/kernel/series"
	log "exported ${#btrfs[@]} btrfs and ${#vfs[@]} FICLONERANGE2 patches to kernel/patches/"
}

src_dir() {
	local k=$1 var=PCSHARE_SRC_$1
	if [ -n "${!var:-}" ]; then echo "${!var}"; else echo "$cache/$k/src"; fi
}

bzimage_path() { echo "$cache/$1/build-$2/arch/x86/boot/bzImage"; }

check_config() {
	local cfg=$1 frag=$2 line sym bad=0
	while read -r line; do
		case "$line" in
		CONFIG_*=*)
			grep -qx -- "$line" "$cfg" || { log "config: wanted $line, got: $(grep -- "^${line%%=*}=" "$cfg" || echo unset)"; bad=1; }
			;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }
			sym=${sym%% *}
			grep -q "^$sym=" "$cfg" && { log "config: wanted $sym unset"; bad=1; }
			;;
		esac
	done <"$frag"
	return $bad
}

cmd_build() {
	local k=$1 v=$2 override=PCSHARE_SRC_$1
	case "$v" in default | debug | lockstat) ;; *) die "unknown variant '$v' (default | debug | lockstat)" ;; esac
	[ -n "${!override:-}" ] || cmd_tree "$k"
	build_tree "$(src_dir "$k")" "$cache/$k/build-$v" "$k" "$v" bzImage
	bzimage_path "$k" "$v"
}

# build_tree SRC OUT KERNEL VARIANT [MAKE ARGS...]: configure OUT (once per
# set of config fragments) and run make there.
build_tree() {
	local src=$1 out=$2 k=$3 v=$4 frags stamp
	shift 4
	frags=("$top/kernel/config/base.config")
	[ "$v" = default ] || frags+=("$top/kernel/config/$v.config")
	# Options the series adds exist only in that kernel's Kconfig.
	[ -f "$top/kernel/config/$k.config" ] && frags+=("$top/kernel/config/$k.config")
	stamp=$(cat "${frags[@]}" | sha256sum | cut -d' ' -f1)
	mkdir -p "$out" "$cache/ccache"
	export CCACHE_DIR=$cache/ccache CCACHE_BASEDIR=$cache CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=8G
	local mk=(make -s -C "$src" O="$out" ARCH=x86_64 CC="ccache gcc" -j"$(nproc)")
	if [ "$(cat "$out/.pcshare-config" 2>/dev/null)" != "$stamp" ]; then
		log "configuring $k/$v in $out"
		"${mk[@]}" tinyconfig >&2
		(cd "$out" && "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${frags[@]}" >/dev/null)
		"${mk[@]}" olddefconfig >&2
		local f ok=1
		for f in "${frags[@]}"; do check_config "$out/.config" "$f" || ok=0; done
		[ $ok = 1 ] || die "the $k/$v config lacks options its fragments ask for (see above)"
		echo "$stamp" >"$out/.pcshare-config"
	fi
	log "building $k/$v in $out"
	local t0=$SECONDS
	"${mk[@]}" "$@" >&2
	log "built $k/$v in $((SECONDS - t0)) s"
}

# Build the pcshare default kernel after every patch of kernel/series, in a
# work tree and build directory of its own ($cache/check), and compile the
# C files each patch touches with W=1 (those the default config builds; the
# others are named); stop at the first patch that fails.
# The layout mirrors pcshare/, so ccache serves what the kernel builds
# already compiled; a patch that changes a header most of the kernel
# includes (fs.h, mm.h, pagemap.h) still costs a full build.
#
# A run resumes: each patch that passes is recorded in $cache/check/passed
# under a chain of content ids (git patch-id of it and of every patch
# before it), so a run stopped part way, or a series changed only at its
# end, starts at the first patch not yet checked in that chain.

# The chain id after each patch: sha256 of the previous id and the patch's
# patch-id, which ignores commit ids, dates and line numbers.
series_chain() {
	local p id chain=base
	for p in $(series_patches); do
		id=$(git patch-id --stable <"$p" | cut -d' ' -f1)
		chain=$(printf '%s %s' "$chain" "$id" | sha256sum | cut -d' ' -f1)
		echo "$chain $p"
	done
}

cmd_check_series() {
	local wt=$cache/check/src out=$cache/check/build-default base=$cache/stock/src
	local passed=$cache/check/passed chain p n=0 total objs warnings skip=0 chains
	cmd_source
	mapfile -t chains < <(series_chain)
	total=${#chains[@]}
	if [ ! -d "$wt" ]; then
		mkdir -p "$cache/check"
		git -C "$base" worktree prune
		git "${git_id[@]}" -C "$base" worktree add -q --detach "$wt" pcshare-base
	fi
	touch "$passed"
	# The patches already checked in this chain are applied without a build.
	for chain in "${chains[@]}"; do
		grep -qx "${chain%% *}" "$passed" || break
		skip=$((skip + 1))
	done
	git -C "$wt" am --abort >/dev/null 2>&1 || true
	git "${git_id[@]}" -C "$wt" checkout -q --force --detach pcshare-base
	git -C "$wt" clean -qfdx
	[ "$skip" = 0 ] || log "patches 1-$skip were checked before (in $passed); resuming at $((skip + 1))"
	for chain in "${chains[@]}"; do
		p=${chain#* } chain=${chain%% *}
		n=$((n + 1))
		git "${git_id[@]}" -C "$wt" am -q --3way "$p" </dev/null ||
			{ git -C "$wt" am --abort || true; die "[$n/$total] $(basename "$p") does not apply"; }
		[ "$n" -gt "$skip" ] || continue
		log "[$n/$total] $(basename "$p")"
		build_tree "$wt" "$out" pcshare default bzImage </dev/null ||
			die "[$n/$total] $(basename "$p"): the kernel does not build"
		objs=
		for o in $(git -C "$wt" diff --name-only HEAD~1 HEAD -- '*.c' | sed 's/\.c$/.o/'); do
			# W=1 of a file the config does not build fails on its
			# missing CONFIG_ symbols, not on the patch.
			if [ -f "$out/$o" ]; then objs="$objs $o"; else log "  $o: not in the default config, not compiled"; fi
		done
		if [ -n "$objs" ]; then
			# shellcheck disable=SC2086
			warnings=$(make -s -C "$wt" O="$out" ARCH=x86_64 CC="ccache gcc" -j"$(nproc)" W=1 $objs 2>&1 </dev/null |
				grep -E 'warning:|error:' || true)
			[ -z "$warnings" ] || die "[$n/$total] $(basename "$p"): W=1 warnings:
$warnings"
		fi
		echo "$chain" >>"$passed"
	done
	log "all $total patches build (bzImage, and W=1 for the files each touches)"
}

# Every patch: one author and one sign-off, both the project's identity.
patch_identity_ok() {
	local p=$1 who="pcshare developers <pcshare@example.org>" ok=0
	[ "$(grep -c '^From: ' "$p")" = 1 ] && grep -qxF "From: $who" "$p" || {
		log "$(basename "$p"): the author must be exactly '$who'"
		ok=1
	}
	[ "$(grep -c '^Signed-off-by: ' "$p")" = 1 ] && grep -qxF "Signed-off-by: $who" "$p" || {
		log "$(basename "$p"): wants exactly one Signed-off-by: $who"
		ok=1
	}
	return $ok
}

# --ignore options for patch $1 from kernel/checkpatch-exceptions.
checkpatch_ignores() {
	local name pattern type why
	name=$(basename "$1")
	while read -r pattern type why; do
		case "$pattern" in '#'* | '') continue ;; esac
		# shellcheck disable=SC2254
		case "$name" in $pattern) echo "--ignore $type" ;; esac
	done <"$top/kernel/checkpatch-exceptions"
}

cmd_check_patches() {
	local p rc=0
	cmd_source
	for p in $(series_patches); do
		patch_identity_ok "$p" || rc=1
		# From the cache: in a git checkout checkpatch leaves a
		# .checkpatch-camelcase.git.* file behind.
		(cd "$cache" && "$cache/stock/src/scripts/checkpatch.pl" --strict --no-tree -q \
			$(checkpatch_ignores "$p") "$p") || rc=1
	done
	return $rc
}

case "${1:-}" in
source) cmd_source ;;
tree) cmd_tree "${2:?kernel}" ;;
dev-tree) cmd_dev_tree "${2:-}" ;;
export) cmd_export "${2:-}" ;;
build) cmd_build "${2:?kernel}" "${3:?variant}" ;;
bzimage) bzimage_path "${2:?kernel}" "${3:?variant}" ;;
series-hash) series_hash ;;
check-patches) cmd_check_patches ;;
check-series) cmd_check_series ;;
-h | --help | help) usage ;;
*) usage >&2; exit 2 ;;
esac
