"""The ground floor every area stands on: what a machine or an image has, as facts.

- ``facts.probe``: runs INSIDE images and on nodes (Python 3.5, standard library only) and records raw command
  outputs and files as JSON;
- ``facts.parsers``: turn recorded tool output (nvidia-smi, ibstat, NCCL logs, mpirun, horovodrun, scontrol, ...)
  into typed values; they never run tools;
- ``facts.versions``: the observed version of each Table 1 row from the probe's JSON;
- ``facts.horovod_gate``: ``python -m facts.horovod_gate --require ...``, whether Horovod is usable as built (run in
  image builds and by ``scripts/setup``).

Nothing here imports another chexstack area: ``images/`` (verification), ``launch/`` (MPI compatibility, failure
explanations) and ``validate/`` (node checks) all import from here, never from each other's rooms for these facts.
"""
