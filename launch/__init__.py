"""Turning a run request into a launch (host side, Python >= 3.10).

- ``request``    ``TrainRequest``: what ``invoke train`` asked for, and the trainer arguments it means
- ``controller`` Gloo or MPI for this host's network interfaces (../shared/cases/23)
- ``horovodrun`` the exact ``horovodrun`` argv and extra environment for a run
- ``stream``     run it, show rank 0's progress (rich), keep the full log, explain a failure
- ``local``      ``invoke train`` on this machine: GPUs, plan, run, results table
- ``job``        ``JobSpec``: a multi-node run of a stack's image, shared by the cluster launchers
- ``mpirun``     Open MPI ``mpirun`` argv with Horovod's flags (Slurm hybrid model, MPIJob launcher)
- ``mpi_compat`` host MPI vs image MPI for Singularity's hybrid model
- ``slurm``      batch scripts: ``srun --mpi=pmix`` + pyxis, or host ``mpirun`` + ``singularity exec``
- ``k8s``        Kubeflow MPIJob (``kubeflow.org/v2beta1``)
- ``submit``     sbatch / kubectl submission
- ``cluster``    ``invoke train --launcher slurm|k8s --render|--submit``
"""
