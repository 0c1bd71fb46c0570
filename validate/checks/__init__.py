"""Node checks. Importing this package registers every check in ``registry.CHECKS``, in report order:
GPUs, topology, NCCL, MPI, InfiniBand, container, Horovod, input capacity."""
from validate.checks import container, cuda, gpu, horovod, infiniband, input_capacity, mpi, nccl, topology  # noqa: F401  (registration)
from validate.checks.registry import CHECKS, Check, Context, check  # noqa: F401
