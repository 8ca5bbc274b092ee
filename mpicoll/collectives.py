"""The functional API: ``mpicoll.allreduce(sendbuf, recvbuf=None, op=MPI.SUM, *, comm=None, algorithm=None)`` and friends.

Argument names follow mpi4py. Conventions shared by every function:

- Buffers are C-contiguous NumPy or CuPy arrays of a dtype MPI can send;
  shapes are free, sizes are what MPI requires (checked). One call's buffers
  are all host or all on one device; allocated results are in the memory of
  the input. Device data is reduced on the device; messages go to a
  CUDA-aware MPI directly or are staged through pinned host memory (see
  :func:`mpicoll.gpu.device_path`).
- ``recvbuf=None`` allocates the result and returns it; a given recvbuf is
  filled and returned. Rooted operations return None on non-root ranks.
- ``sendbuf=MPI.IN_PLACE`` (where MPI allows it) takes the input from
  ``recvbuf`` and overwrites it.
- ``algorithm``: a name from :func:`mpicoll.algorithms`, ``"native"`` for the
  MPI library's own collective, or ``"auto"``; when None,
  ``MPICOLL_<PRIMITIVE>_ALGORITHM`` is used, then ``auto``.
- Bad arguments raise :class:`mpicoll.ArgumentError` on every rank before any
  message is sent (see ``MPICOLL_CHECK``).

The ``_name(call, bufs, ...)`` functions are the one implementation behind
the functional API, :class:`mpicoll.P2PComm` and :mod:`mpicoll.distributed`;
``bufs`` is a zero-argument callable returning the raw buffers, so that
parsing errors are held and agreed like every other argument error.
"""

from mpi4py import MPI

from . import coll as _coll  # noqa: F401  (importing it fills the registry)
from .args.buffers import (
    IN_PLACE, as_array, check_counts, check_no_alias, check_root, check_size, same_dtype,
    same_memory)
from .device.arrays import adapter_of, empty, on_device
from .engine.context import Ctx
from .engine import host_copy as _host_copy, memo as _memo
from .engine import nonblocking as _nb
from .engine.run import execute
from .core.errors import ArgumentError
from .core.ops import check_op

__all__ = ["bcast", "reduce", "allreduce", "gather", "allgather", "scatter",
           "reduce_scatter_block", "reduce_scatter", "alltoall", "barrier"]


def _is_in_place(buf):
    return buf is IN_PLACE


def _not_in_place(argname, where):
    return ArgumentError(f"{argname}: MPI.IN_PLACE is only valid {where}", MPI.ERR_BUFFER)


def _recv_array(argname, recvbuf, send, expected, how, alloc_shape):
    """The receive buffer for ``send`` (a flat sendbuf): allocated when None, else
    checked for dtype, size (``expected`` elements) and overlap with ``send``.

    Returns (the object to hand back to the caller, its flat view).
    """
    if recvbuf is None:
        out = empty(send, alloc_shape)
        return out, out.reshape(-1)
    flat = as_array(argname, recvbuf, writable=True)
    same_memory("sendbuf", send, argname, flat)
    if flat.dtype != send.dtype:
        raise ArgumentError(
            f"{argname}: expected dtype {send.dtype} (the dtype of sendbuf); got {flat.dtype}",
            MPI.ERR_TYPE)
    check_size(argname, flat, expected, how)
    check_no_alias("sendbuf", send, argname, flat)
    return recvbuf, flat


def _snapshot(a):
    """A copy of ``a`` for an in-place call, and the (dst, src) pair that refreshes it.

    Blocking and nonblocking calls copy once, now; a persistent request
    copies again at every ``Start`` (the input is whatever is in the buffer then).
    """
    copy = empty(a, a.shape)
    copy[...] = a
    return copy, (copy, a)


def _run(call, count, itemsize, fn, *args, prologue=None, local=False):
    """Run ``fn`` on this call's buffers (blocking, or as the call's request).

    ``count``: elements moved, the same on every rank -- or, ``local``, this rank's
    own (alltoallv's): zero then means nothing to move *here*, which the
    hand-written algorithms skip (they leave empty blocks out on both sides), but
    MPI's own collective must still be called on every rank.
    """
    # Device buffers (all of one call share one memory) choose the transport.
    adapter = device = None
    like = op = None
    for a in args:
        if isinstance(a, MPI.Op):
            op = a
        elif like is None and a is not None and not isinstance(a, (int, list, tuple)):
            like = a
            adapter = adapter_of(a)
            if adapter is not None:
                device = adapter.device_id(a)
    if call.host_copy:                 # small and on a device: host mirrors (see _host_copy)
        return _host_copy.run(call, count, itemsize, fn, args, prologue, adapter, device)
    ctx = call.ctx(count, itemsize, adapter, device)  # recorded for traffic() even when empty
    if not count and fn.primitive != "barrier" and not (local and fn.algorithm == "native"):
        if call.kind is not None:
            _nb.empty_request(call, None)
        return
    ctx.op, ctx.like = op, like
    with on_device(adapter, device):   # kernels, streams and copies on the data's GPU
        entry = None
        if fn.algorithm != "native":
            entry = call.state.plans.get(fn, call.rank, call.size, args, itemsize, op)
        fast = ctx.mpi is ctx.comm and ctx._rec is None and type(ctx) is Ctx
        if call.kind is None:
            steps = execute(ctx, fn, entry, args, op, fast)
            if _memo.wanted(call, ctx, count * itemsize):
                # The memo replays them (see _memo); device steps on their transport.
                dev = None if fast else _memo.device_binding(ctx.mpi, adapter, device)
                call.memo[:] = (steps, prologue, dev)
            return

        def run_now():
            with on_device(adapter, device):
                if prologue is not None:
                    prologue[0][...] = prologue[1]
                execute(ctx, fn, entry, args, op, fast)
        memo = None
        if call.kind == "start" and entry is not None and _memo.wanted(call, ctx, count * itemsize):
            memo = []                  # the bound program, for the memo to replay
        _nb.start(call, ctx, fn, args, op, entry, fast, run_now, prologue, memo)
        if memo:
            call.memo[:] = (memo[0], prologue,
                            None if fast else _memo.device_binding(ctx.mpi, adapter, device))


# -- bcast -----------------------------------------------------------------

def _bcast(call, bufs, root, algorithm):
    with call.checking():
        (buf,) = bufs()
        root = check_root(root, call.size)
        flat = as_array("buf", buf, writable=call.rank != root)
        fn = call.choose(algorithm, nbytes=flat.nbytes, count=flat.size, dtype=flat.dtype,
                         root=root, like=(flat,))
    call.settle()
    _run(call, flat.size, flat.itemsize, fn, flat, root)
    return buf


def bcast(buf, root=0, *, comm=None, algorithm=None):
    """Broadcast ``buf`` from ``root`` into ``buf`` on every rank; return ``buf``.

    Per rank, N = 3: ``[1 2 3]`` on rank 0 and zeros elsewhere -> ``[1 2 3]`` everywhere.
    """
    return _memo.run("bcast", _bcast, comm, algorithm, (buf,), (root,), (root,))


# -- reduce ----------------------------------------------------------------

def _reduce(call, bufs, op, root, algorithm):
    with call.checking():
        root = check_root(root, call.size)
        is_root = call.rank == root
        sendbuf, recvbuf = bufs()
        if _is_in_place(sendbuf):
            if not is_root:
                raise _not_in_place("sendbuf", "on the root")
            out = recvbuf
            data = as_array("recvbuf", recvbuf, writable=True)
            dest = data
        else:
            data = as_array("sendbuf", sendbuf)
            out, dest = None, None
            if is_root:
                out, dest = _recv_array("recvbuf", recvbuf, data, data.size,
                                        "as many as sendbuf", sendbuf.shape)
        check_op(op, data.dtype)
        fn = call.choose(algorithm, op=op, nbytes=data.nbytes, count=data.size,
                         dtype=data.dtype, root=root, like=(data, dest))
    call.settle()
    pro = None
    if _is_in_place(sendbuf):
        data, pro = _snapshot(data)   # algorithms may write recvbuf before reading sendbuf
    _run(call, data.size, data.itemsize, fn, data, dest, op, root, prologue=pro)
    return out if is_root else None


def reduce(sendbuf, recvbuf=None, op=MPI.SUM, root=0, *, comm=None, algorithm=None):
    """Reduce every rank's ``sendbuf`` with ``op`` into ``recvbuf`` on ``root``.

    Returns the result on the root, None elsewhere. ``sendbuf=MPI.IN_PLACE``
    on the root takes its input from ``recvbuf``.
    Per rank, N = 3, SUM: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> root gets ``[6 6]``.
    """
    return _memo.run("reduce", _reduce, comm, algorithm, (sendbuf, recvbuf), (op, root), (op, root))


# -- allreduce -------------------------------------------------------------

def _allreduce(call, bufs, op, algorithm):
    with call.checking():
        sendbuf, recvbuf = bufs()
        if _is_in_place(sendbuf):
            out = recvbuf
            dest = as_array("recvbuf", recvbuf, writable=True)
            data = None
        else:
            data = as_array("sendbuf", sendbuf)
            out, dest = _recv_array("recvbuf", recvbuf, data, data.size,
                                    "as many as sendbuf", sendbuf.shape)
        check_op(op, dest.dtype)
        fn = call.choose(algorithm, op=op, nbytes=dest.nbytes, count=dest.size,
                         dtype=dest.dtype, like=(data, dest))
    call.settle()
    _run(call, dest.size, dest.itemsize, fn, data, dest, op)
    return out


def allreduce(sendbuf, recvbuf=None, op=MPI.SUM, *, comm=None, algorithm=None):
    """Reduce every rank's ``sendbuf`` with ``op``; every rank gets the result.

    Results are bitwise identical on every rank. ``sendbuf=MPI.IN_PLACE``
    reduces ``recvbuf`` in place.
    Per rank, N = 3, SUM: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> ``[6 6]`` everywhere.
    """
    return _memo.run("allreduce", _allreduce, comm, algorithm, (sendbuf, recvbuf), (op,), (op,))


# -- gather / allgather ----------------------------------------------------

def _gather(call, bufs, root, algorithm):
    with call.checking():
        root = check_root(root, call.size)
        is_root = call.rank == root
        sendbuf, recvbuf = bufs()
        n = call.size
        out = dest = None
        if _is_in_place(sendbuf):
            if not is_root:
                raise _not_in_place("sendbuf", "on the root")
            out = recvbuf
            dest = as_array("recvbuf", recvbuf, writable=True)
            if dest.size % n:
                raise ArgumentError(
                    f"recvbuf: expected a multiple of {n} elements (one block per rank); "
                    f"got {dest.size}", MPI.ERR_COUNT)
            c = dest.size // n
            data = dest[root * c:(root + 1) * c]
        else:
            data = as_array("sendbuf", sendbuf)
            if is_root:
                out, dest = _recv_array("recvbuf", recvbuf, data, n * data.size,
                                        f"{n} ranks x {data.size}", (n,) + sendbuf.shape)
        fn = call.choose(algorithm, nbytes=data.nbytes, count=data.size, dtype=data.dtype,
                         root=root, like=(data, dest))
    call.settle()
    _run(call, data.size, data.itemsize, fn, data, dest, root)
    return out if is_root else None


def gather(sendbuf, recvbuf=None, root=0, *, comm=None, algorithm=None):
    """Gather every rank's ``sendbuf`` into ``recvbuf`` (N blocks) on ``root``.

    Allocated results have shape ``(N, *sendbuf.shape)``. Returns None off the root.
    Per rank, N = 3: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> root gets ``[[1 1] [2 2] [3 3]]``.
    """
    return _memo.run("gather", _gather, comm, algorithm, (sendbuf, recvbuf), (root,), (root,))


def _allgather(call, bufs, algorithm):
    with call.checking():
        sendbuf, recvbuf = bufs()
        n = call.size
        if _is_in_place(sendbuf):
            out = recvbuf
            dest = as_array("recvbuf", recvbuf, writable=True)
            if dest.size % n:
                raise ArgumentError(
                    f"recvbuf: expected a multiple of {n} elements (one block per rank); "
                    f"got {dest.size}", MPI.ERR_COUNT)
            c = dest.size // n
            data = dest[call.rank * c:(call.rank + 1) * c]
        else:
            data = as_array("sendbuf", sendbuf)
            out, dest = _recv_array("recvbuf", recvbuf, data, n * data.size,
                                    f"{n} ranks x {data.size}", (n,) + sendbuf.shape)
        fn = call.choose(algorithm, nbytes=data.nbytes, count=data.size, dtype=data.dtype,
                         like=(data, dest))
    call.settle()
    _run(call, data.size, data.itemsize, fn, data, dest)
    return out


def allgather(sendbuf, recvbuf=None, *, comm=None, algorithm=None):
    """Gather every rank's ``sendbuf`` into ``recvbuf`` on every rank.

    Per rank, N = 3: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> ``[[1 1] [2 2] [3 3]]`` everywhere.
    ``sendbuf=MPI.IN_PLACE``: this rank's block is already in ``recvbuf``.
    """
    return _memo.run("allgather", _allgather, comm, algorithm, (sendbuf, recvbuf), (), ())


# -- scatter ---------------------------------------------------------------

def _scatter(call, bufs, root, algorithm):
    with call.checking():
        root = check_root(root, call.size)
        is_root = call.rank == root
        sendbuf, recvbuf = bufs()
        n = call.size
        data = None
        if _is_in_place(recvbuf):
            if not is_root:
                raise _not_in_place("recvbuf", "on the root")
            data = as_array("sendbuf", sendbuf)
            if data.size % n:
                raise ArgumentError(
                    f"sendbuf: expected a multiple of {n} elements (one block per rank); "
                    f"got {data.size}", MPI.ERR_COUNT)
            # The root's block stays where it is; algorithms get a scratch copy.
            c = data.size // n
            out, dest = None, data[root * c:(root + 1) * c].copy()
        else:
            if recvbuf is None:
                raise ArgumentError(
                    "recvbuf: expected an array to receive this rank's block (every rank "
                    "needs one); got None", MPI.ERR_BUFFER)
            out = recvbuf
            dest = as_array("recvbuf", recvbuf, writable=True)
            if is_root:
                data = as_array("sendbuf", sendbuf)
                same_memory("recvbuf", dest, "sendbuf", data)
                same_dtype("recvbuf", dest, "sendbuf", data)
                check_size("sendbuf", data, n * dest.size, f"{n} ranks x {dest.size}")
                check_no_alias("sendbuf", data, "recvbuf", dest)
        fn = call.choose(algorithm, nbytes=dest.nbytes, count=dest.size, dtype=dest.dtype,
                         root=root, like=(data, dest))
    call.settle()
    _run(call, dest.size, dest.itemsize, fn, data, dest, root)
    return out


def scatter(sendbuf, recvbuf, root=0, *, comm=None, algorithm=None):
    """Send block i of ``sendbuf`` on ``root`` into ``recvbuf`` on rank i; return recvbuf.

    ``sendbuf`` (N blocks) matters only on the root. ``recvbuf=MPI.IN_PLACE``
    on the root leaves its block where it is (and returns None there).
    Per rank, N = 3: root's ``[1 1 2 2 3 3]`` -> ``[1 1]``, ``[2 2]``, ``[3 3]``.
    """
    return _memo.run("scatter", _scatter, comm, algorithm, (sendbuf, recvbuf), (root,), (root,))


# -- reduce_scatter --------------------------------------------------------

def _reduce_scatter(call, bufs, counts, op, algorithm):
    with call.checking():
        sendbuf, recvbuf = bufs()
        n = call.size
        if _is_in_place(sendbuf):
            full = as_array("recvbuf", recvbuf, writable=True)
        else:
            full = as_array("sendbuf", sendbuf)
        if counts is None:
            if full.size % n:
                raise ArgumentError(
                    f"{'recvbuf' if _is_in_place(sendbuf) else 'sendbuf'}: expected a multiple "
                    f"of {n} elements (equal blocks); got {full.size}", MPI.ERR_COUNT)
            counts = [full.size // n] * n
        else:
            counts = check_counts("recvcounts", counts, n)
            total = sum(counts)
            if _is_in_place(sendbuf):
                if full.size < total:
                    raise ArgumentError(
                        f"recvbuf: expected at least sum(recvcounts) = {total} elements "
                        f"(in place it holds the input); got {full.size}", MPI.ERR_COUNT)
                full = full[:total]
            else:
                check_size("sendbuf", full, total, "sum(recvcounts)")
        mine = counts[call.rank]
        if _is_in_place(sendbuf):
            out, dest = recvbuf, full[:mine]
        else:
            block_shape = (mine,)
            if sendbuf.ndim > 1 and sendbuf.shape[0] == n and len(set(counts)) == 1:
                block_shape = sendbuf.shape[1:]
            out, dest = _recv_array("recvbuf", recvbuf, full, mine,
                                    f"recvcounts[{call.rank}]", block_shape)
        check_op(op, full.dtype)
        fn = call.choose(algorithm, op=op, nbytes=full.nbytes, count=full.size,
                         dtype=full.dtype, counts=counts, like=(full, dest))
    call.settle()
    pro = None
    if _is_in_place(sendbuf):
        full, pro = _snapshot(full)   # the result overwrites the start of the input
    _run(call, full.size, full.itemsize, fn, full, dest, counts, op, prologue=pro)
    return out


def reduce_scatter_block(sendbuf, recvbuf=None, op=MPI.SUM, *, comm=None, algorithm=None):
    """Reduce ``sendbuf`` (N equal blocks) with ``op``; rank i gets block i.

    Per rank, N = 2, SUM: ``[1 2]``, ``[10 20]`` -> ``[11]``, ``[22]``.
    ``sendbuf=MPI.IN_PLACE``: ``recvbuf`` holds the input; the result goes to its start.
    """
    return _memo.run("reduce_scatter", _reduce_scatter, comm, algorithm, (sendbuf, recvbuf),
                     (None, op), (None, op))


def reduce_scatter(sendbuf, recvbuf=None, recvcounts=None, op=MPI.SUM, *, comm=None,
                   algorithm=None):
    """Reduce ``sendbuf`` with ``op``; rank i gets the ``recvcounts[i]`` elements of block i.

    ``recvcounts=None`` means N equal blocks (as :func:`reduce_scatter_block`).
    Per rank, N = 2, counts [1, 2], SUM: ``[1 2 3]``, ``[10 20 30]`` -> ``[11]``, ``[22 33]``.
    """
    return _memo.run("reduce_scatter", _reduce_scatter, comm, algorithm, (sendbuf, recvbuf),
                     (recvcounts, op), (recvcounts, op))


# -- alltoall --------------------------------------------------------------

def _alltoall(call, bufs, algorithm):
    with call.checking():
        sendbuf, recvbuf = bufs()
        n = call.size
        if _is_in_place(sendbuf):
            out = recvbuf
            dest = as_array("recvbuf", recvbuf, writable=True)
            data = dest
        else:
            data = as_array("sendbuf", sendbuf)
            out, dest = _recv_array("recvbuf", recvbuf, data, data.size,
                                    "as many as sendbuf", sendbuf.shape)
        if data.size % n:
            raise ArgumentError(
                f"{'recvbuf' if data is dest else 'sendbuf'}: expected a multiple of {n} "
                f"elements (one block per rank); got {data.size}", MPI.ERR_COUNT)
        fn = call.choose(algorithm, nbytes=data.nbytes // n, count=data.size // n,
                         dtype=data.dtype, like=(data, dest))
    call.settle()
    pro = None
    if data is dest:
        data, pro = _snapshot(data)
    _run(call, data.size, data.itemsize, fn, data, dest, prologue=pro)
    return out


def alltoall(sendbuf, recvbuf=None, *, comm=None, algorithm=None):
    """Send block j of ``sendbuf`` to rank j; block i of ``recvbuf`` comes from rank i.

    Per rank, N = 2: ``[a0 a1]``, ``[b0 b1]`` -> ``[a0 b0]``, ``[a1 b1]``.
    """
    return _memo.run("alltoall", _alltoall, comm, algorithm, (sendbuf, recvbuf), (), ())


# -- barrier ---------------------------------------------------------------

def _barrier(call, algorithm):
    with call.checking():
        fn = call.choose(algorithm)
    call.settle()
    if call.size == 1:
        call.ctx()                     # recorded for traffic()
        if call.kind is not None:
            _nb.empty_request(call, None)
        return
    _run(call, 0, 0, fn)


def barrier(*, comm=None, algorithm=None):
    """Block until every rank of ``comm`` has called barrier."""
    _memo.run("barrier", _barrier_bufs, comm, algorithm, (), (), ())


def _barrier_bufs(call, bufs, algorithm):
    _barrier(call, algorithm)
