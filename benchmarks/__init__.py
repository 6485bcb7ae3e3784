"""Benchmarks of bayescale: run ``python -m benchmarks.<name>``; results go to ``benchmarks/results`` and ``RESULTS.md``."""
