"""Turning a run request into a launch (host side, Python >= 3.10).

- ``request``    ``TrainRequest``: what ``invoke train`` asked for, and the trainer arguments it means
- ``controller`` Gloo or MPI for this host's network interfaces (../shared/cases/23)
- ``horovodrun`` the exact ``horovodrun`` argv and extra environment for a run
- ``stream``     run it, show rank 0's progress (rich), keep the full log, explain a failure
- ``local``      ``invoke train`` on this machine: GPUs, plan, run, results table
"""
