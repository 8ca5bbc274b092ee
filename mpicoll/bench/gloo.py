"""The ``gloo`` column: torch.distributed's gloo backend on the bench's buffers, as a reference.

What a PyTorch user would otherwise call where NCCL cannot run (ranks
sharing one GPU, CPU tensors): ``torch.distributed`` with the ``gloo``
backend. With ``gloo`` among the algorithms, :func:`setup` creates one
process group for the run (a ``TCPStore`` on rank 0's host, its port sent
with MPI) and the sweep times ``gloo`` rows beside mpicoll's, on tensors that
share the bench's buffers (``torch.from_numpy``, ``torch.from_dlpack`` for
CuPy: no copy), with the same untimed check.

Rows: ``allreduce`` (``dist.all_reduce`` in place on the receive buffer,
after copying the input into it, as a torch user with separate buffers
would) and ``bcast`` (``dist.broadcast``): the two collectives gloo runs on
CUDA tensors as well as on CPU ones. Other primitives are skipped with that
reason. Each call is synchronous (gloo waits; device work is synchronised
like every row's). The whole column is skipped, the reason printed once and
recorded in the provenance, when torch or its gloo backend is missing on
some rank, the dtype or op has no torch counterpart, or the process group
cannot be made; every such decision is collective.

Tested here with a stand-in for torch (tests/fake_torch); not yet run
against a real torch by this code's author.
"""
import socket

import numpy as np

from .nccl import Skipped

__all__ = ["LABEL", "PRIMITIVES", "Column", "wanted", "setup", "torch_dtype", "reduce_op"]

LABEL = "gloo"

#: The primitives of this column (gloo runs both on CUDA and CPU tensors).
PRIMITIVES = ("allreduce", "bcast")

_DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64")
_OPS = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX"}


class Unsupported(ValueError):
    """torch/gloo cannot run this (the message is the reason shown to the user)."""


def torch_dtype(torch, dtype):
    """The torch dtype of a NumPy ``dtype`` (Unsupported if torch has none)."""
    name = np.dtype(dtype).name
    if name not in _DTYPES or not hasattr(torch, name):
        raise Unsupported(f"gloo: no torch dtype for {name} (this column takes "
                          f"{', '.join(_DTYPES)})")
    return getattr(torch, name)


def reduce_op(dist, opname):
    """``dist.ReduceOp`` of the bench's op name (sum, prod, min, max)."""
    attr = _OPS.get(str(opname).lower())
    if attr is None:
        raise Unsupported(f"gloo: torch.distributed has no reduction for {opname!r} "
                          f"(it has {', '.join(_OPS)})")
    return getattr(dist.ReduceOp, attr)


class Column:
    """One gloo process group for the run; makes the ``gloo`` calls of each case."""

    usable = True
    reason = None

    def __init__(self, torch, dist, am, version):
        self.torch, self.dist, self.am, self.version = torch, dist, am, version

    def info(self):
        return {"requested": True, "used": True, "reason": None, "torch_version": self.version,
                "backend": "gloo", "device": self.am.name == "cupy"}

    def skip_reason(self, spec, op):
        """Why ``spec``'s primitive has no gloo row (None: it has one). Same on every rank."""
        if spec.name not in PRIMITIVES:
            return (f"gloo: this column runs {' and '.join(PRIMITIVES)} only (the collectives "
                    f"gloo has for CUDA tensors); {spec.name} skipped")
        return None

    def _tensor(self, a):
        if self.am.name == "cupy":
            return self.torch.from_dlpack(a)
        return self.torch.from_numpy(a)

    def call(self, case):
        """A zero-argument callable: one gloo collective on ``case``'s buffers, completed."""
        dist, sync = self.dist, self.am.sync
        prim = case.spec.name
        if prim == "bcast":
            t, root = self._tensor(case.recv), case.root

            def run():
                dist.broadcast(t, src=root)
                sync()
            return run
        if prim == "allreduce":
            op = reduce_op(dist, case.opname)
            t = self._tensor(case.recv)
            send, recv = case.send, case.recv

            def run():
                recv[...] = send        # all_reduce is in place
                dist.all_reduce(t, op=op)
                sync()
            return run
        raise Unsupported(f"gloo: no row for {prim}")

    def close(self):
        """Destroy the process group (every rank, at the end of the run)."""
        try:
            self.dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - the run is over either way
            pass


def wanted(args):
    """True when the run asks for the gloo column (``gloo`` listed)."""
    return LABEL in getattr(args, "algorithms", [])


def _import():
    import torch
    import torch.distributed as dist
    if not dist.is_available():
        raise ImportError("torch.distributed is not available in this torch build")
    if not dist.is_gloo_available():
        raise ImportError("this torch build has no gloo backend")
    return torch, dist


def setup(comm, am, dtype, opname, *, modules=None, timeout_s=120):
    """The run's :class:`Column`, or :class:`mpicoll.bench.nccl.Skipped` with the reason.

    Collective. ``modules``: ``() -> (torch, torch.distributed)`` (tests stand in for torch).
    """
    from datetime import timedelta
    err = mods = None
    try:
        mods = (modules or _import)()
        torch_dtype(mods[0], dtype)
        reduce_op(mods[1], opname)
    except Unsupported as exc:
        err = str(exc)
    except Exception as exc:  # noqa: BLE001 - no torch, no gloo: a reason to skip
        err = f"gloo: torch is not usable: {type(exc).__name__}: {exc}"
    errs = comm.allgather(err)
    bad = [(r, e) for r, e in enumerate(errs) if e]
    if bad:
        return Skipped(f"{bad[0][1]} (rank {bad[0][0]}); gloo column skipped")
    torch, dist = mods
    rank, n = comm.Get_rank(), comm.Get_size()
    store = err = None
    where = None
    if rank == 0:
        try:
            host = socket.gethostname()
            store = dist.TCPStore(host, 0, n, True, timedelta(seconds=timeout_s))
            where = (host, int(store.port))
        except Exception as exc:  # noqa: BLE001
            err = f"gloo: TCPStore on rank 0 failed: {type(exc).__name__}: {exc}"
    where, err = comm.bcast((where, err), root=0)
    if err:
        return Skipped(err)
    try:
        if rank:
            store = dist.TCPStore(where[0], where[1], n, False, timedelta(seconds=timeout_s))
        dist.init_process_group("gloo", store=store, rank=rank, world_size=n,
                                timeout=timedelta(seconds=timeout_s))
    except Exception as exc:  # noqa: BLE001
        err = f"{type(exc).__name__}: {exc}"
    errs = comm.allgather(err)
    failed = [(r, e) for r, e in enumerate(errs) if e]
    if failed:
        if err is None:
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - already skipping
                pass
        return Skipped(f"gloo: init_process_group failed on rank {failed[0][0]}: {failed[0][1]}")
    col = Column(torch, dist, am, getattr(torch, "__version__", "unknown"))
    col.store = store               # rank 0 serves it: keep it for the run
    return col
