"""The ground floor every area stands on: what a machine or an image has, as facts.

Its entries, one job each:

- ``facts.probe``: runs INSIDE images and on nodes (Python 3.5, standard library only, imports nothing of the
  project) and records raw command outputs and files as JSON; ``facts.cuda_probe`` whether CUDA can use each GPU
  (the driver API through ctypes, Python 3.5; read by ``facts.parsers.cuda``);
- ``facts.parsers``: turn recorded tool output (nvidia-smi, ibstat, NCCL logs, mpirun, horovodrun, scontrol, ...)
  into typed values; they never run tools. Each declares the command lines it reads
  (``facts.parsers.observation.Observation``);
- ``facts.versions``: the observed version of each Table 1 row from the probe's JSON;
- ``facts.horovod_gate``: ``python -m facts.horovod_gate --require ...``, whether Horovod is usable as built (run in
  image builds and by ``scripts/setup``);
- ``facts.host``: this host's shared facts (git state, GPUs, CPU cores, RDMA ports); ``facts.apt_sources``: this
  machine's Debian mirror (debootstrap's one choice);
- programs that measure: ``facts.transport`` (allreduce vs raw TCP between two hosts, started under ``mpirun``; its
  ``chexstack-transport:`` line is read by ``facts.transport.parse``) and ``facts.decoderate`` (one core's PNG decode
  rate, ``facts.decoderate.parse``); change a measurement there, never in a caller;
- rules about tools and published data, each stated once: ``facts.openmpi`` (run as root, shared memory in
  containers), ``facts.pyxis`` (how pyxis reads ``--container-image``: the Slurm launcher's, ``invoke validate
  --job``'s and ``--explain``'s one rule), ``facts.gpu_rates`` (NVIDIA's published per-GPU rates and the
  input-capacity verdict, ``facts.gpu_rates.capacity``), ``facts.signals`` (the fault-signal lexicon,
  ``facts/signals.yaml``);
- ``facts.faults_table``: the one table of faults, every code with its meaning, next action (``Action``) and remedy
  (``facts.faults_table.remedy``), which ``validate.catalogue`` publishes and ``launch.failure``,
  ``facts.parsers.faults.CAUSES`` and validate's checks read.

What other areas read here rather than parse themselves: a launcher's output (``facts.parsers.horovodrun``: rank
lines and failures; ``facts.parsers.slurm``: ``scontrol -o show job|node`` records, ``parse_scontrol`` and
``parse_nodes``, and the follower's own lines, ``facts.parsers.slurm.PREFIX`` and ``LOST_NODE_LINE``), a launch
refused before the ranks ran (``facts.parsers.mpi.classify_launch``), the log classifiers
(``facts.parsers.nccl.parse_nccl_log`` and ``classify_nccl_failure``,
``facts.parsers.container.classify_runtime_error``, ``facts.parsers.pyxis.classify_pyxis``, ``facts.parsers.faults``:
fault-class lines in time order) and Horovod's own timeline (``facts.parsers.horovod_timeline``, which
``bench.attribution`` splits).

Nothing here imports another chexstack area but the plumbing (``chexstack``): ``images/`` (verification), ``launch/``
(MPI compatibility, failure explanations) and ``validate/`` (node checks) all import from here, never from each
other's rooms for these facts.
"""
