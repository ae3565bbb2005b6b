"""Benchmarks on the controller: the workload settings as the sglang_benchmark role's variables (bench_vars), the
noise of repeated measurements and the verdict on it (noise), profiles compared side by side (compare_report)."""
