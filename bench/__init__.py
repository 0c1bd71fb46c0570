"""Benchmarks (each script prints a ratio measured side by side in one run) and the scaling sweep behind
``invoke bench`` / ``invoke bench-report`` (``bench.main``, ``bench.sweep``, ``bench.figure``)."""
