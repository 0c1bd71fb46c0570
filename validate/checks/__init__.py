"""Node checks. Importing this package registers every check in ``registry.CHECKS``, in report order:
GPUs, topology, NCCL, MPI, InfiniBand, container, Horovod."""
from validate.checks import gpu, topology, nccl, mpi, infiniband, container, horovod  # noqa: F401  (registration)
from validate.checks.registry import CHECKS, Check, Context, check  # noqa: F401
