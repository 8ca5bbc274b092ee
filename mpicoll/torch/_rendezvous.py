"""Rendezvous from the MPI launcher: ``init_process_group`` under ``mpirun``/``srun`` as it is.

torch finds its peers through a key-value store (``init_method``, default
``env://``, which needs ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK`` and
``WORLD_SIZE``: torchrun sets them, ``mpirun`` does not). Under an MPI
launcher the ranks already know each other, so this module adds:

- ``init_method="mpi://"``: rank and world size are ``MPI.COMM_WORLD``'s; rank 0
  serves a ``TCPStore`` on a free port of its host and sends its address to the
  others with MPI (collective over ``COMM_WORLD``, as ``init_process_group`` is);
- ``env://`` without ``MASTER_ADDR`` or ``MASTER_PORT`` set: the same, in place of
  torch's "environment variable MASTER_ADDR expected" error. With both set,
  torch's own ``env://`` runs unchanged (torchrun, or your own variables).

The store is what torch itself keeps and what other backends of the job
(``new_group(backend="gloo")``) use; the mpicoll backend sends nothing through it.
"""
import importlib
import os
import socket
from datetime import timedelta
from urllib.parse import urlparse

from mpi4py import MPI
from torch.distributed import TCPStore

# The module, not the function of the same name that torch.distributed exports.
_rdzv = importlib.import_module("torch.distributed.rendezvous")

__all__ = ["install", "mpi_store"]

_env_handler = None


def _query(url):
    pairs = (p.split("=", 1) for p in filter(None, urlparse(url).query.split("&")))
    return {k: v for k, v in pairs}


def mpi_store(timeout=timedelta(minutes=30)):
    """A ``TCPStore`` served by ``COMM_WORLD``'s rank 0 and joined by every rank (collective).

    Rank 0 binds a free port; ``MPICOLL_TORCH_STORE_HOST`` names the address the
    others reach it at (default: rank 0's host name).
    """
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    where = err = store = None
    if rank == 0:
        try:
            host = os.environ.get("MPICOLL_TORCH_STORE_HOST") or socket.gethostname()
            store = TCPStore(host, 0, size, True, timeout, wait_for_workers=False)
            where = (host, int(store.port))
        except Exception as exc:
            err = f"{type(exc).__name__}: {exc}"
    where, err = comm.bcast((where, err), root=0)
    if err:
        raise RuntimeError(f"mpi:// rendezvous: the TCPStore on rank 0 failed: {err}")
    if rank:
        store = TCPStore(where[0], where[1], size, False, timeout)
    return store


def _mpi_handler(url, timeout=timedelta(minutes=30), **kwargs):
    q = _query(url)
    comm = MPI.COMM_WORLD
    rank = int(q.get("rank", -1))
    size = int(q.get("world_size", -1))
    store = mpi_store(timeout)
    # Ranks given by the caller are kept: the backend compares them with MPI's and
    # raises on every rank where they differ.
    yield (store, comm.Get_rank() if rank < 0 else rank, comm.Get_size() if size < 0 else size)
    raise RuntimeError("mpi:// rendezvous cannot be repeated")


def _env_or_mpi(url, timeout=timedelta(minutes=30), **kwargs):
    if os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT"):
        return _env_handler(url, timeout=timeout, **kwargs)
    return _mpi_handler(url, timeout=timeout, **kwargs)


def install():
    """Register ``mpi://`` and let ``env://`` fall back to it (idempotent)."""
    global _env_handler
    handlers = _rdzv._rendezvous_handlers
    if "mpi" not in handlers:
        _rdzv.register_rendezvous_handler("mpi", _mpi_handler)
    if _env_handler is None:
        _env_handler = handlers["env"]
        handlers["env"] = _env_or_mpi
