"""mpicoll as a torch.distributed backend: ``import mpicoll.torch`` registers ``"mpicoll"``.

::

    import torch, torch.distributed as dist
    import mpicoll.torch                            # registers the backend
    dist.init_process_group(backend="mpicoll")      # under mpirun / srun: nothing else to set
    t = torch.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t)                              # mpicoll's algorithm, on t's own memory

Every torch.distributed collective runs mpicoll's hand-written algorithms (or
``native``, the MPI library's own) on the tensors' memory: CPU tensors as
NumPy views, CUDA tensors as CuPy views on torch's current stream. The
process group wraps an MPI communicator: ``COMM_WORLD``'s duplicate for the
default group, a sub-communicator for each ``new_group``; the ranks must be
MPI's (checked on every rank). Algorithms: ``pg_options=mpicoll.torch.Options(
algorithms={"allreduce": "ring"})`` or ``MPICOLL_ALGORITHM=allreduce=ring,bcast=binomial``;
``auto`` otherwise. ``mpicoll.traffic()`` counts the messages of calls made
through torch as of any other call.

Rendezvous: under an MPI launcher, ``env://`` without ``MASTER_ADDR`` and
``init_method="mpi://"`` take rank and size from MPI and a store served by
rank 0 (:mod:`._rendezvous`); torchrun's variables, ``tcp://``, ``file://``
and ``store=`` work as with any backend.
"""
from datetime import timedelta

import torch.distributed as dist
from mpi4py import MPI
from torch.distributed.constants import default_pg_timeout

from ..engine.context import traffic
from ._backend import Options, ProcessGroupMpicoll, parse_algorithms
from ._monitored import MonitoredBarrierError
from ._rendezvous import install as _install_rendezvous
from ._rendezvous import mpi_store
from ._tensors import SUPPORTED as DTYPES

__all__ = ["ProcessGroupMpicoll", "Options", "BACKEND", "DTYPES", "traffic", "mpi_store",
           "create_process_group", "parse_algorithms", "MonitoredBarrierError"]

#: The backend's name for ``init_process_group(backend=...)``.
BACKEND = "mpicoll"


def _world_check(rank, size):
    """Raise on every rank unless torch's rank and size are ``MPI.COMM_WORLD``'s.

    Collective over COMM_WORLD, which every process of the job enters in
    init_process_group.
    """
    world = MPI.COMM_WORLD
    every = world.allgather((rank, size))
    bad = [(r, t) for r, t in enumerate(every) if t != (r, world.Get_size())]
    if bad:
        shown = "; ".join(f"MPI rank {r} of {world.Get_size()} has torch rank {t[0]} of {t[1]}"
                          for r, t in bad[:4])
        more = f" (and {len(bad) - 4} more)" if len(bad) > 4 else ""
        raise RuntimeError(
            f"mpicoll backend: torch's ranks must be MPI's: {shown}{more}. Launch the job with "
            f"mpirun/mpiexec/srun (one MPI world), or pass rank and world_size that match "
            f"MPI.COMM_WORLD")


def create_process_group(dist_options, pg_options=None):
    """The backend's creator (``extended_api``): a :class:`ProcessGroupMpicoll`.

    For the default group (on a duplicate of ``COMM_WORLD``) or for a ``new_group`` (on the
    sub-communicator of its ranks, made by the members alone, as torch calls this on the
    members only).
    """
    rank, size = dist_options.group_rank, dist_options.group_size
    ranks = list(dist_options.global_ranks_in_group or [])
    world = MPI.COMM_WORLD
    if not ranks:
        _world_check(rank, size)
        comm = world.Dup()
    else:
        if dist.is_initialized() and dist.get_rank() != world.Get_rank():
            raise RuntimeError(
                f"mpicoll backend: the default group's rank {dist.get_rank()} is not MPI's "
                f"({world.Get_rank()}): new_group's ranks would name other processes")
        group = world.Get_group().Incl(ranks)
        try:
            comm = world.Create_group(group, tag=0x7C01)
        finally:
            group.Free()
        if comm.Get_rank() != rank or comm.Get_size() != size:
            raise RuntimeError(
                f"mpicoll backend: new_group rank {rank} of {size} is MPI rank "
                f"{comm.Get_rank()} of {comm.Get_size()} in the group's communicator")
    if pg_options is not None and not isinstance(pg_options, Options):
        raise TypeError(f"pg_options: expected mpicoll.torch.Options; got {type(pg_options)}")
    # A timeout the user chose is honoured (every call a request waited on with a deadline);
    # torch's default (30 min, passed when none is given) keeps the blocking fast path.
    timeout = getattr(dist_options, "timeout", None)
    if timeout is not None and timeout == default_pg_timeout:
        timeout = None
    return ProcessGroupMpicoll(comm, rank, size, pg_options,
                               timeout=None if timeout is None else timeout.total_seconds())


def _register():
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, create_process_group, extended_api=True,
                                      devices=["cpu", "cuda"])
    _install_rendezvous()


_register()
del timedelta
