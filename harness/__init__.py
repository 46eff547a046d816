"""Shared code of the pcshare harness, tests and benchmarks."""
