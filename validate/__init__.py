"""Node fitness checks: is this node fit to run a chexstack stack at full speed, and what to fix.

Checks (``validate.checks``) read the node through ``validate.evidence`` (live, recorded into a bundle, or
replayed from one), call the parsers of ``facts.parsers`` and return a ``CheckResult``; ``validate.report``
decides the table, the JSON and the exit code in one place.

The contract of a check (a new one touches ``validate/checks/<area>.py``, an ``Observation`` and its parser in
``facts/parsers/<tool>.py``, its codes in the table of faults ``facts/faults_table.py`` and the regenerated
``validate/schema/catalogue-v1.json``, and a bundle; a new area also ``validate/checks/__init__.py``):

- A check is ``@check("area.name", "title", requires=(...), fast=True|False)`` (``validate.checks.registry.check``;
  ``fast``: it fits a Slurm prolog, seconds and no launch, and ``invoke validate --fast`` runs only those) in
  ``validate/checks/<area>.py``, a function of the ``validate.checks.registry.Context`` that returns a
  ``validate.result.CheckResult`` (status PASS/WARN/FAIL/SKIP/ERROR, measured, expected, remedy, diagnosis code,
  details, tries, explains). Every non-PASS result's code is one of ``validate.catalogue`` (meaning, next action on
  the ladder ``validate.catalogue.Action``, noisy; the table itself is ``facts.faults_table``, with each code's
  remedy): the one list other areas may key on, published as
  ``validate/schema/catalogue-v1.json``; a new fault family gets a new code, never a new meaning for an old one. A
  SKIP's reason made far from its ``skipped`` call is a ``validate.result.Reason``. A measured check repeats a noisy
  shortfall through ``validate.tries.until_pass``, never by a loop of its own.
- A check reads the node only through its context: ``tool`` (``chexstack.tools.run``: timeout, a missing tool
  recorded, never raised), ``read``, ``glob``, ``fact`` (a JSON value no tool prints), ``observe`` and ``first``.
  Never ``open``, ``os.*``, ``subprocess`` or an SDK call in a check outside a ``fact``'s compute; what a replayed
  bundle lacks raises ``validate.evidence.MissingEvidence``, reported as a SKIP. A check that raises is an ERROR
  (exit 2): never catch an ImportError of this tree to SKIP.
- Which command lines a parser reads is said once, beside the parser, by a
  ``facts.parsers.observation.Observation(argv, also, parse)`` (e.g. ``facts.parsers.cuda.CUDA_PROBE``,
  ``facts.parsers.horovodrun.CHECK_BUILD``); a check runs one with ``ctx.observe(OBS)`` or finds a bundle's recorded
  run with ``ctx.first(OBS)``, gets it ``Observed`` (``facts.parsers.observation.Observed``), judges it with a pure
  ``judge_*`` function the tests call on recorded fixtures, and says in its details where its evidence came from.
  Checks never inspect argv (``tests/test_checks_observe.py``).
- A recorded node is a bundle, ``tests/data/bundles/<name>.yaml`` (evidence taken from the shared fixtures by
  reference, built at test time by ``tests/lib/bundle_corpus.py``, with the verdict table it must give; checks not
  listed must be SKIP). Record an output under the command that printed it, never under the check's own argv. A new
  shared fixture needs a bundle, or an entry in ``NOT_VALIDATE_INPUT`` of ``tests/test_validate_bundles.py``.
- No PASS over a fault signal nobody explained: ``validate.report.account_signals`` scans all the evidence each
  check read (``Context.read_by``) with the lexicon ``facts/signals.yaml`` (``facts.signals``). A finding claims a
  signal by quoting its line, by a code the entry's ``claimed_by`` names, or by naming it in
  ``CheckResult.explains``; any other makes a PASS a WARN ``UNEXPLAINED_FAULT_SIGNAL``. A benign line healthy nodes
  print is an exclusion (``unless``) in the lexicon, with its source (``tests/test_validate_signals.py``).
- ``validate.report`` alone decides the table, the JSON (``validate.report_schema``, published as
  ``validate/schema/report-v1.json``, schema ``chexstack.validate.report/1``; both schemas are generated, and
  ``tests/test_validate_verdict.py`` says how) and the exit code (0 / 1 FAIL / 2 could not run).
- ``validate.jobfile`` judges a user's MPIJob or Slurm script by the rules ``launch`` renders with (``invoke validate
  --job``); a rule with nothing in the file to judge is SKIP, never PASS.

What validate shares with other areas lives below it, in ``facts``: a refused ``mpirun`` is classified by
``facts.parsers.mpi.classify_launch`` (keyed on the line that tells the causes apart, never Open MPI's generic
banner) and its remedies are the table's (``facts.faults_table.remedy``; ``launch.failure.LAUNCH_REMEDY``), which
``mpi.launch``, a failed ``invoke train`` and ``invoke train --explain LOG`` all name; the log classifiers
``facts.parsers.nccl.classify_nccl_failure``, ``facts.parsers.container.classify_runtime_error`` and
``facts.parsers.pyxis.classify_pyxis``; the one allreduce
vs TCP measurement ``facts.transport`` (``mpi.bandwidth``, ``bench/ratios/allreduce_transport.py``); the one PNG
decode rate ``facts.decoderate`` with its verdict ``facts.gpu_rates.capacity`` (``input.capacity``, ``invoke
bench``); whether CUDA can use each GPU, ``facts.cuda_probe`` (``gpu.cuda``).
"""
