"""The project's ratio benchmarks: each script measures two variants side by side in one run and prints their ratio
(``bench.ratios.sidebyside``), the only form a speed or memory claim of this repository takes. Run one as
``.venv/bin/python -m bench.ratios.<name>``. The product's own measurement, the scaling sweep, is ``bench/`` itself
(``invoke bench``, ``invoke bench-report``)."""
