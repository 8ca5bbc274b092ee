"""The torch.distributed calls the seed uses, on NumPy or CuPy arrays, over mpicoll.

Port a seed example by changing its import and its tensors::

    import mpicoll.distributed as dist
    dist.init_process_group(backend="p2p")            # or "native"
    x = np.array([dist.get_rank() + 1] * 5, dtype=np.float32)
    dist.all_reduce(x, op=dist.ReduceOp.SUM)          # in place, like torch

Backends: ``"p2p"`` (mpicoll's hand-written algorithms; the seed's
``"nccl"`` and ``"gloo"`` map here) and ``"native"`` (the MPI library's own
collectives; ``"mpi"`` maps here). ``algorithms={"all_reduce": "ring", ...}``
(torch or MPI primitive names) picks algorithms for the p2p backend.
Every collective takes ``async_op=True`` and then returns a :class:`Work`
(``wait()``, ``is_completed()``), as torch does; the p2p backend runs it as
a nonblocking mpicoll collective (:mod:`mpicoll.api`).

This module stays beside the real torch backend (``backend="mpicoll"``,
:mod:`mpicoll.torch`) as a thin layer because it needs no torch: the seed's
scripts run on NumPy or CuPy arrays. What the two share is read from one
place: the primitives' ``run`` (:mod:`mpicoll.calls`) and torch's op names
(:data:`mpicoll.core.ops.TORCH_OPS`).

Tensors may be CuPy arrays (select the rank's GPU first, e.g. with
:func:`mpicoll.gpu.select_device`); the lists of gather/scatter calls must
then be CuPy arrays on the same device.
"""
import enum

import numpy as np
from mpi4py import MPI

from .args.buffers import is_device, same_memory
from .calls import allgather as _allgather
from .calls import allreduce as _allreduce
from .calls import alltoall as _alltoall
from .calls import barrier as _barrier
from .calls import bcast as _bcast
from .calls import gather as _gather
from .calls import reduce as _reduce
from .calls import reduce_scatter as _reduce_scatter
from .calls import scatter as _scatter
from .core import watchdog as _wd
from .core.errors import ArgumentError, ArgumentTypeError, describe
from .core.ops import TORCH_OPS
from .core.registry import PRIMITIVES, lookup
from .device.arrays import empty
from .engine.call import Call

__all__ = ["ReduceOp", "init_process_group", "destroy_process_group", "is_initialized",
           "get_rank", "get_world_size", "get_backend", "broadcast", "reduce", "all_reduce",
           "gather", "all_gather", "scatter", "reduce_scatter", "all_to_all_single", "barrier",
           "Work"]

BACKENDS = {"p2p": "p2p", "nccl": "p2p", "gloo": "p2p", "native": "native", "mpi": "native"}

_TORCH_NAMES = {"broadcast": "bcast", "all_reduce": "allreduce", "all_gather": "allgather",
                "reduce_scatter": "reduce_scatter", "all_to_all": "alltoall"}


class ReduceOp(enum.Enum):
    """torch.distributed.ReduceOp, mapped onto MPI ops (AVG = SUM, then / N).

    The members and their MPI ops are :data:`mpicoll.core.ops.TORCH_OPS`' (the torch
    backend reads the same table); PREMUL_SUM, an NCCL factory's op, is torch's only.
    """

    SUM = "SUM"
    PRODUCT = "PRODUCT"
    MIN = "MIN"
    MAX = "MAX"
    BAND = "BAND"
    BOR = "BOR"
    BXOR = "BXOR"
    AVG = "AVG"

    @property
    def mpi_op(self):
        """The MPI op that runs this op (AVG: SUM, then the division by N)."""
        return getattr(MPI, TORCH_OPS[self.value])


_state = {"comm": None, "backend": None, "algorithms": {}}


def init_process_group(backend="p2p", *, comm=None, algorithms=None, **_ignored):
    """Set up the group: ``comm`` (default COMM_WORLD), backend, algorithms.

    torch's other keywords (``init_method``, ``world_size``, ``rank``,
    ``timeout``) are accepted and ignored: MPI's launcher already decided them.
    """
    if not isinstance(backend, str) or backend.lower() not in BACKENDS:
        raise ArgumentError(
            f"backend: expected one of {', '.join(sorted(BACKENDS))}; got {backend!r}")
    comm = MPI.COMM_WORLD if comm is None else comm
    if not isinstance(comm, MPI.Intracomm):
        raise ArgumentTypeError(f"comm: expected an mpi4py.MPI.Intracomm; got {describe(comm)}")
    chosen = {}
    for key, name in (algorithms or {}).items():
        prim = _TORCH_NAMES.get(key, key)
        if prim not in PRIMITIVES:
            raise ArgumentError(
                f"algorithms: {key!r} is not a primitive; expected keys among "
                f"{', '.join(PRIMITIVES)} (or torch names {', '.join(_TORCH_NAMES)})")
        if name != "auto":
            try:
                lookup(prim, name)
            except ArgumentError as exc:
                raise ArgumentError(f"algorithms[{key!r}]: {exc}") from None
        chosen[prim] = name
    _state.update(comm=comm, backend=BACKENDS[backend.lower()], algorithms=chosen)


def destroy_process_group():
    """Forget the default group (torch.distributed's ``destroy_process_group``)."""
    _state.update(comm=None, backend=None, algorithms={})


def is_initialized():
    """True once :func:`init_process_group` was called (and not destroyed since)."""
    return _state["comm"] is not None


def _group():
    if _state["comm"] is None:
        raise RuntimeError("mpicoll.distributed: call init_process_group() first")
    return _state["comm"]


def _algo(primitive):
    if _state["backend"] == "native":
        return "native"
    return _state["algorithms"].get(primitive)


def get_rank():
    """This rank in the default group."""
    return _group().Get_rank()


def get_world_size():
    """The number of ranks of the default group."""
    return _group().Get_size()


def get_backend():
    """The backend of the default group: ``"p2p"`` or ``"native"``."""
    _group()
    return _state["backend"]


def _op(op):
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, MPI.Op):
        return op
    raise ArgumentTypeError(f"op: expected a mpicoll.distributed.ReduceOp; got {describe(op)}")


def _mpi_op(op):
    return op.mpi_op if isinstance(op, ReduceOp) else op


def _check_op(op, tensor):
    """Validate ``op`` (inside the agreed validation, before anything is written)."""
    op = _op(op)
    if op is ReduceOp.AVG and getattr(getattr(tensor, "dtype", None), "kind", "f") not in "fc":
        raise ArgumentError(
            f"op: ReduceOp.AVG needs floating-point data; got dtype {tensor.dtype}", MPI.ERR_OP)
    return op


class Work:
    """torch.distributed's work handle for ``async_op=True``: ``wait()``, ``is_completed()``."""

    def __init__(self, request, then=None):
        self._request = request
        self._then = then          # finishing step (AVG division, list unstacking), run once

    def _finish(self):
        then, self._then = self._then, None
        if then is not None:
            then()

    def wait(self, timeout=None):
        """Block until the collective is complete (its results in the tensors); True."""
        self._request.Wait()
        self._finish()
        return True

    def is_completed(self):
        """True once complete (advances every pending mpicoll collective)."""
        if self._request.Test():
            self._finish()
            return True
        return False

    def is_success(self):
        """True once complete (as :meth:`is_completed`)."""
        return self.is_completed()


def _call(primitive, comm, async_op):
    return Call(primitive, comm, "start" if async_op else None)


def _done(call, then=None):
    """Blocking: finish now and return None; ``async_op``: a :class:`Work`."""
    if call.kind is None:
        if then is not None:
            then()
        return None
    return Work(call.request, then)


def _unstack(tensors, stacked):
    for t, row in zip(tensors, stacked, strict=False):
        t[...] = row


def _average(tensor, op):
    if op is ReduceOp.AVG:
        tensor /= get_world_size()


def broadcast(tensor, src=0, async_op=False):
    """Copy ``tensor`` on ``src`` into ``tensor`` on every rank (in place)."""
    call = _call("bcast", _group(), async_op)
    _bcast.run(call, lambda: (tensor,), src, _algo("bcast"))
    return _done(call)


def reduce(tensor, dst=0, op=ReduceOp.SUM, async_op=False):
    """Reduce into ``tensor`` on ``dst`` (in place); other ranks' tensors are unchanged."""
    comm = _group()
    is_dst = comm.Get_rank() == dst

    def bufs():
        _check_op(op, tensor)
        return (MPI.IN_PLACE, tensor) if is_dst else (tensor, None)
    call = _call("reduce", comm, async_op)
    _reduce.run(call, bufs, _mpi_op(op), dst, _algo("reduce"))
    return _done(call, (lambda: _average(tensor, op)) if is_dst else None)


def all_reduce(tensor, op=ReduceOp.SUM, async_op=False):
    """Reduce ``tensor`` across ranks, in place on every rank."""
    def bufs():
        _check_op(op, tensor)
        return MPI.IN_PLACE, tensor
    call = _call("allreduce", _group(), async_op)
    _allreduce.run(call, bufs, _mpi_op(op), _algo("allreduce"))
    return _done(call, lambda: _average(tensor, op))


def _check_list(argname, lst, n, like):
    if not isinstance(lst, (list, tuple)):
        raise ArgumentTypeError(f"{argname}: expected a list of {n} arrays; got {describe(lst)}")
    if len(lst) != n:
        raise ArgumentError(f"{argname}: expected {n} arrays (one per rank); got {len(lst)}",
                            MPI.ERR_COUNT)
    for i, t in enumerate(lst):
        if not (isinstance(t, np.ndarray) or is_device(t)):
            raise ArgumentTypeError(
                f"{argname}[{i}]: expected a NumPy or CuPy array; got {describe(t)}")
        same_memory("tensor", like, f"{argname}[{i}]", t)
        if t.shape != like.shape or t.dtype != like.dtype:
            raise ArgumentError(
                f"{argname}[{i}]: expected shape {like.shape} and dtype {like.dtype} "
                f"(like tensor); "
                f"got shape {t.shape} and dtype {t.dtype}", MPI.ERR_COUNT)
        if isinstance(t, np.ndarray) and not t.flags.writeable:
            raise ArgumentError(f"{argname}[{i}]: expected a writable array; got a read-only one",
                                MPI.ERR_BUFFER)


def gather(tensor, gather_list=None, dst=0, async_op=False):
    """Gather every rank's ``tensor`` into ``gather_list`` (a list of N arrays) on ``dst``."""
    comm = _group()
    n, is_dst = comm.Get_size(), comm.Get_rank() == dst
    stage = {}

    def bufs():
        if is_dst:
            _check_list("gather_list", gather_list, n, tensor)
            stage["out"] = empty(tensor, (n,) + tensor.shape)
        return tensor, stage.get("out")
    call = _call("gather", comm, async_op)
    _gather.run(call, bufs, dst, _algo("gather"))
    return _done(call, (lambda: _unstack(gather_list, stage["out"])) if is_dst else None)


def all_gather(tensor_list, tensor, async_op=False):
    """Gather every rank's ``tensor`` into ``tensor_list`` (N arrays) on every rank."""
    comm = _group()
    n = comm.Get_size()
    stage = {}

    def bufs():
        _check_list("tensor_list", tensor_list, n, tensor)
        stage["out"] = empty(tensor, (n,) + tensor.shape)
        return tensor, stage["out"]
    call = _call("allgather", comm, async_op)
    _allgather.run(call, bufs, _algo("allgather"))
    return _done(call, lambda: _unstack(tensor_list, stage["out"]))


def scatter(tensor, scatter_list=None, src=0, async_op=False):
    """Rank i's ``tensor`` receives ``scatter_list[i]`` from ``src``."""
    comm = _group()
    n, is_src = comm.Get_size(), comm.Get_rank() == src

    def bufs():
        send = None
        if is_src:
            _check_list("scatter_list", scatter_list, n, tensor)
            send = np.stack(scatter_list)
        return send, tensor
    call = _call("scatter", comm, async_op)
    _scatter.run(call, bufs, src, _algo("scatter"))
    return _done(call)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, async_op=False):
    """Reduce ``input_list`` (N arrays) across ranks; rank i's ``output`` gets entry i."""
    comm = _group()
    n = comm.Get_size()

    def bufs():
        _check_op(op, output)
        _check_list("input_list", input_list, n, output)
        return np.stack(input_list), output
    call = _call("reduce_scatter", comm, async_op)
    _reduce_scatter.run(call, bufs, None, _mpi_op(op), _algo("reduce_scatter"))
    return _done(call, lambda: _average(output, op))


def all_to_all_single(output, input, async_op=False):  # torch's name
    """Block j of ``input`` goes to rank j; block i of ``output`` comes from rank i."""
    call = _call("alltoall", _group(), async_op)
    _alltoall.run(call, lambda: (input, output), _algo("alltoall"))
    return _done(call)


def barrier(async_op=False):
    """Wait until every rank has entered."""
    call = _call("barrier", _group(), async_op)
    _barrier.run(call, None, _algo("barrier"))
    return _done(call)


def _timed(fn, primitive):
    """``fn`` (a blocking-or-async collective above) timed by the collective watchdog when on."""
    def call(*args, **kwargs):
        if _wd.ON and _wd.REC.name is None and not kwargs.get("async_op", False) and \
                _state["comm"] is not None:
            return _wd.watched(fn, primitive, _state["comm"], *args, **kwargs)
        return fn(*args, **kwargs)
    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    call.__wrapped__ = fn
    return call


for _name, _prim in (("broadcast", "bcast"), ("reduce", "reduce"), ("all_reduce", "allreduce"),
                     ("gather", "gather"), ("all_gather", "allgather"), ("scatter", "scatter"),
                     ("reduce_scatter", "reduce_scatter"), ("all_to_all_single", "alltoall"),
                     ("barrier", "barrier")):
    globals()[_name] = _timed(globals()[_name], _prim)
del _name, _prim
