"""The product's measurement: the scaling sweep behind ``invoke bench`` / ``invoke bench-report`` (``bench.main``,
``bench.sweep``, ``bench.figure``), the seed study (``invoke study``, ``bench.study``) and the project's ratio
benchmarks (``bench.ratios``: each script prints a ratio measured side by side in one run).

What other areas may rely on (fields are the code's pydantic models; each module's docstring has the detail):

- **A sweep's results** are one JSON file, schema ``chexstack.bench.sweep/1`` (``bench.results.SCHEMA``):
  ``bench.results.Sweep`` of a ``label``, a ``source``, a run record (``bench.results.RunRecord``: where and what ran,
  the data as the trainer hashed it, ``label_sha256`` and ``train_split_sha256``) and ``points``
  (``bench.results.Point``: a count, its images/s, the ``repeats`` of ``invoke bench --repeats N`` in run order with
  ``images_per_sec`` their median, per-rank rates, step times, and a ``--timeline`` run's ``step_split``:
  ``bench.results.StepSplit``, compute / input wait / exposed allreduce, from ``bench.attribution``). Efficiencies
  are derived on load; ``bench.results.load_sweep`` validates a file (errors name file and field). Published series
  (``bench/reference/``) use the same schema with only a partial record and counts with their images/s.
- Statistics over repeats are ``bench.stats``, what two sweeps must share to be compared ``bench.guard.COMPARED``,
  the regression gate ``bench.gate``.
- **A sweep is a list of requests**: ``bench.sweep.throughput_requests`` gives one ``launch.request.TrainRequest`` per
  count (smallest first; ``argv`` the trainer's throughput mode, ``bench.sweep.throughput_argv``), so every launcher of
  ``invoke train`` runs a sweep's count: ``bench.sweep.run_sweep`` runs each through ``launch.run`` at one
  ``bench.sweep.place``, and ``bench.batch.specs`` makes each a Slurm job step or an MPIJob of a scheduler's job. Each
  count's ``throughput.json`` (``trainer.outputs``) becomes a point.
- **The study** (``bench.study.StudyRequest``) is one sweep run as several systems (``bench.study.SYSTEMS``, each
  with its scheduler of ``launch.schedulers.SCHEDULERS``: ``bench.study.SCHEDULER_OF``) in ``bench.study.order``
  (repeat by repeat, the systems' order rotating); the MPIJob system runs as its pods on this Docker engine
  (``launch.pods``). Each series is a system on a network path (``bench.study.PATHS_OF``, ``bench.netpath.PATHS``:
  ``mpijob:overlay``, ``mpijob:host``), its record saying the path declared and observed (``bench.netpath.observe``);
  ``bench.guard.effect`` never calls a gap across paths container overhead. ``bench.study.run_study`` writes one
  sweep per series and the figure (``bench.main.report``).
"""
