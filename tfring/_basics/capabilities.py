"""What this process can use, in Horovod's words (``hvd.nccl_built()`` ...).

Horovod answers "was it compiled in"; tfring answers "can this process use it here", so a
script that branches on ``hvd.nccl_built()`` takes the GPU branch only where NCCL, the CUDA
runtime and a GPU are all usable (``tfring.gpu_info()`` says why not). tfring's
collectives never go through MPI, Gloo, oneCCL or ROCm: those are always False. Every
function is a local query (no collective), cheap after the first GPU probe.
"""

import functools

from tfring import _core


@functools.lru_cache(maxsize=1)
def _gpu_usable():
    return bool(_core.gpu_info().get("available"))


def nccl_built():
    """True when GPU tensors can be reduced here through NCCL (library, CUDA runtime and a
    GPU all usable); see ``tfring.gpu_info()`` for why not."""
    return _gpu_usable()


def cuda_built():
    """True when the CUDA runtime and a GPU are usable here (tfring's GPU path needs both,
    and NCCL: the same answer as ``nccl_built``)."""
    return _gpu_usable()


def rocm_built():
    """False: tfring has no ROCm path."""
    return False


def mpi_built():
    """False: tfring's collectives never use MPI (``mpirun`` can still start a job; see
    docs/launcher.md)."""
    return False


def mpi_enabled():
    """False, as ``mpi_built``."""
    return False


def gloo_built():
    """False: tfring has its own TCP / shared-memory transport, not Gloo's."""
    return False


def gloo_enabled():
    """False, as ``gloo_built``."""
    return False


def ccl_built():
    """False: no oneCCL path."""
    return False


def ddl_built():
    """False: no IBM DDL path."""
    return False


def mpi_threads_supported():
    """Horovod raises ``ValueError`` when MPI is not in use; tfring never uses MPI.

    Raises:
      ValueError: always, saying so.
    """
    raise ValueError("mpi_threads_supported() has no meaning in tfring: its collectives never use MPI "
                     "(mpi_built() is False). Drop the check, or treat it as False.")
