"""The benchmarks, one module a side: NAME, the host side (make bench-NAME
runs python3 -m bench.NAME); NAME_guest, run in the guest as python3 -m
bench.NAME_guest; plot_NAME, its PNG. guestbench, tables, plotting and
clone_results are what they share (docs/benchmarks.md)."""
