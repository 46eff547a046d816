# pcshare: see README.md. Kernel trees and builds live in $(PCSHARE_CACHE).
PYTHON ?= $(shell command -v python3)
export PCSHARE_CACHE ?= $(HOME)/.cache/pcshare
# The checkout's packages (harness/, bench/; pyproject.toml) for every
# program run from here, without installing them.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
DEV ?= $(PCSHARE_CACHE)/dev
DEMO_ARGS ?=
BENCH_ARGS ?=
SOAK_MINUTES ?= 10
SOAK_VARIANT ?= debug
SOAK_ARGS ?=
PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
CFLAGS ?= -O2 -g -Wall -Wextra
TOOL := tools/pcshare/pcshare
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)

.PHONY: help deps tool install kernels publish test test-debug test-host fstests cp demo bench-unshared bench-clone bench-lockhold bench-clone-items bench-containers bench-vm bench-mix bench-hit bench-uring bench-scaling bench-lockstat bench-cp bench-clone-scale soak dev-tree export-patches check-patches check-series clean-cache

help:
	@echo "make demo            the seed experiment on stock and pcshare kernels -> runs/demo.json"
	@echo "make test            build the pcshare kernel and cp, run the host and guest suites (ends with"
	@echo "                     a summary line); PCSHARE_TEST_KERNELS=pcshare:default,pcshare:debug adds"
	@echo "                     the debug kernel's debug_kernel cases, stock:default adds stock"
	@echo "make test-debug      every guest test the debug kernel (lockdep, KASAN) runs at all; before"
	@echo "                     submitting a kernel change (not part of make test)"
	@echo "make bench-unshared  reads of unshared data, stock vs pcshare -> runs/unshared.json"
	@echo "make bench-clone     readers and a writer during clones -> runs/clone.json, .png"
	@echo "make bench-lockhold  4 KiB writers during one 1 GiB cold pread -> runs/lockhold.json"
	@echo "make bench-clone-items  extent items FICLONE and FICLONERANGE2 leave -> runs/clone-items.json"
	@echo "make bench-containers   N containers (snapshots of a python image): cache growth, disk bytes"
	@echo "                     -> runs/containers.json, runs/containers.png"
	@echo "make bench-vm        a disk image cloned (1, 4, 8 times), read by fio engines -> runs/vm.json, .png"
	@echo "make bench-mix       the seed report's Figures 2-8 (fio on a parent and clones) -> runs/mix.json, .png"
	@echo "make bench-hit       hot-cache reads of a shared clone vs stock's own cache -> runs/hit.json, .png"
	@echo "make bench-uring     cold io_uring 4 KiB reads at queue depths 1, 8, 32 -> runs/uring.json, .png"
	@echo "make bench-scaling   1, 2, 4, 8 cold readers at once, distinct files and clones -> runs/scaling.json, .png"
	@echo "make bench-lockstat  the locks 8 cold readers at once contend on (/proc/lock_stat of the kernels'"
	@echo "                     lockstat builds) -> runs/lockstat.json"
	@echo "make bench-cp        fio on a fragmented image while cp --reflink clones it, stock cp (FICLONE)"
	@echo "                     vs patched cp (FICLONERANGE2) -> runs/cp.json, .png (runs make cp first)"
	@echo "make bench-clone-scale  clones of 10^4, 10^5, 10^6-extent files under fio: time, stalls,"
	@echo "                     memory, fitted out to 10^8 -> runs/clone-scale.json, .png"
	@echo "                     (each bench takes BENCH_ARGS; python3 -m bench.NAME --help lists them;"
	@echo "                     make bench-vm runs bench.vmimage)"
	@echo "make soak            SOAK_MINUTES=$(SOAK_MINUTES) of random operations checked against a model,"
	@echo "                     pcshare SOAK_VARIANT=$(SOAK_VARIANT) kernel, shared_cache -> runs/soak.json"
	@echo "make publish         copy runs/ (what demo and bench-* wrote) into results/, regenerate the tables in README.md, docs/"
	@echo "make kernels         build the stock and pcshare kernels (default variant)"
	@echo "make dev-tree        kernel git tree with the series applied, at DEV=$(DEV)"
	@echo "make export-patches  write DEV's commits back to kernel/patches and kernel/series"
	@echo "make check-patches   checkpatch.pl --strict on the series (exceptions: kernel/checkpatch-exceptions)"
	@echo "make check-series    build the kernel after every patch, W=1 on touched files (pre-submit; 66 min"
	@echo "                     here; resumes at the first patch not yet checked)"
	@echo "make cp              build GNU cp with userspace/coreutils/ (cp --reflink through FICLONERANGE2)"
	@echo "                     under PCSHARE_CACHE/coreutils; prints the binary's path"
	@echo "make tool            build the pcshare tool ($(TOOL))"
	@echo "make install         install pcshare and its man page under PREFIX=$(PREFIX)"
	@echo "make deps            install apt/pip packages (done by demo and test too)"
	@echo "make fstests         patched fstests + xfs_io (userspace/), new FICLONERANGE2 tests and clone tests"
	@echo "                     on btrfs and XFS, stock and pcshare kernels -> runs/fstests.json"
	@echo "                     (FSTESTS_ARGS; FSTESTS_NO_KERNEL_BUILD=1 boots the kernels already built)"

deps:
	@PYTHON=$(PYTHON) scripts/deps.sh

tool: $(TOOL)

# Every .c and .h of the tool, as tests/host/test_tool.py compiles it.
TOOL_SRCS := $(sort $(wildcard tools/pcshare/*.c))
TOOL_HDRS := $(wildcard tools/pcshare/*.h)
$(TOOL): $(TOOL_SRCS) $(TOOL_HDRS)
	$(CC) $(CFLAGS) -DPCSHARE_VERSION='"$(VERSION)"' -o $@ $(TOOL_SRCS)

install: $(TOOL)
	install -D -m 0755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/pcshare
	install -D -m 0644 tools/pcshare/pcshare.1 $(DESTDIR)$(PREFIX)/share/man/man1/pcshare.1

kernels: deps
	scripts/kernel.sh build stock default
	scripts/kernel.sh build pcshare default

# The patched cp too, so that its tests (tests/guest/test_cp_reflink.py) run.
test: deps $(TOOL) cp
	$(PYTHON) scripts/run_tests.py

# Every guest test the debug kernel (lockdep, KASAN, DEBUG_VM) runs at all
# (btrfs with shared_cache; no xfs or bench_smoke cases): about 40 min here
# with the kernel built, measured before the suites' sizes were cut. Not in
# make test, whose time from an empty cache it would push past an hour;
# before submitting a kernel change.
test-debug: deps $(TOOL)
	$(PYTHON) scripts/run_tests.py --kernels pcshare:debug --no-host --full-debug

# fstests in guests (docs/fstests.md); not part of `make test`.
FSTESTS_ARGS ?=
fstests: deps
	scripts/fstests-deps.sh
	@if [ -z "$(FSTESTS_NO_KERNEL_BUILD)" ]; then \
		scripts/kernel.sh build stock default >/dev/null && \
		scripts/kernel.sh build pcshare default >/dev/null; \
	else echo "fstests: FSTESTS_NO_KERNEL_BUILD set: using the kernels already built"; fi
	scripts/fstests-build.sh
	$(PYTHON) scripts/fstests.py $(FSTESTS_ARGS)

test-host: deps $(TOOL)
	scripts/kernel.sh build pcshare default >/dev/null
	$(PYTHON) -m pytest -p no:cacheprovider -v tests/host

demo: deps
	$(PYTHON) -m bench.demo $(DEMO_ARGS)

bench-unshared: deps
	$(PYTHON) -m bench.unshared $(BENCH_ARGS)

bench-clone: deps $(TOOL)
	$(PYTHON) -m bench.clone $(BENCH_ARGS)

bench-lockhold: deps
	$(PYTHON) -m bench.lockhold $(BENCH_ARGS)

bench-clone-items: deps
	$(PYTHON) -m bench.clone_items $(BENCH_ARGS)

bench-containers: deps
	$(PYTHON) -m bench.containers $(BENCH_ARGS)

bench-vm: deps
	$(PYTHON) -m bench.vmimage $(BENCH_ARGS)

bench-mix: deps
	$(PYTHON) -m bench.mix $(BENCH_ARGS)

bench-hit: deps
	$(PYTHON) -m bench.hit $(BENCH_ARGS)

bench-uring: deps
	$(PYTHON) -m bench.uring $(BENCH_ARGS)

bench-scaling: deps
	$(PYTHON) -m bench.scaling $(BENCH_ARGS)

bench-lockstat: deps
	$(PYTHON) -m bench.lockstat $(BENCH_ARGS)

bench-cp: deps cp
	$(PYTHON) -m bench.cp $(BENCH_ARGS)

bench-clone-scale: deps $(TOOL)
	$(PYTHON) -m bench.clone_scale $(BENCH_ARGS)

cp:
	@scripts/coreutils.sh build

# The soak in a guest on a scratch disk; runs/soak.json also when it fails.
SOAK_OUT := $(PCSHARE_CACHE)/soak
SOAK_PYTHON = $$($(PYTHON) -c 'import sys; print(sys.executable)')
soak: deps
	scripts/kernel.sh build pcshare $(SOAK_VARIANT) >/dev/null
	mkdir -p runs && rm -f $(SOAK_OUT)/soak.json
	$(PYTHON) -m harness.vm --kernel pcshare --variant $(SOAK_VARIANT) --disk 8G --mem 3G \
		--timeout $$(( $(SOAK_MINUTES) * 60 + 1800 )) --out $(SOAK_OUT) -- \
		$(SOAK_PYTHON) tests/soak.py --device /dev/vda --mount-options shared_cache \
		--seconds $$(( $(SOAK_MINUTES) * 60 )) --json /run/pcshare/out/soak.json $(SOAK_ARGS); \
	status=$$?; cp $(SOAK_OUT)/soak.json runs/soak.json && echo "runs/soak.json"; exit $$status

# New runs go to runs/ (harness/results.py); results/ changes only here, so
# a measurement never makes the table check in `make test` fail.
RUNS = $(or $(PCSHARE_RUNS),runs)
publish:
	@ls $(RUNS)/*.json >/dev/null 2>&1 || { echo "publish: no $(RUNS)/*.json: run make demo or a make bench-NAME first" >&2; exit 1; }
	cp $(RUNS)/*.json results/
	@for f in $(RUNS)/*.png $(RUNS)/*.md $(RUNS)/*.txt; do [ ! -e "$$f" ] || cp -v "$$f" results/; done
	$(PYTHON) -m bench.tables --write
	@echo "publish: results/, README.md and docs/ updated; review with git diff"

dev-tree: deps
	scripts/kernel.sh dev-tree $(DEV)

export-patches:
	scripts/kernel.sh export $(DEV)

check-patches: deps
	scripts/kernel.sh check-patches

check-series: deps
	scripts/kernel.sh check-series

clean-cache:
	rm -rf $(PCSHARE_CACHE)
