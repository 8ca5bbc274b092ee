"""Nonblocking (``i...``) and persistent (``..._init``) forms of the functional API.

Each takes the arguments of its blocking function (:mod:`mpicoll.collectives`)
and returns a request instead of the result::

    req = mpicoll.iallreduce(x, y, algorithm="ring")   # messages start moving
    ...compute...
    y = req.Wait()                                     # or mpicoll.waitall([req, ...])

    p = mpicoll.allreduce_init(x, y, algorithm="rabenseifner")
    for step in range(n):
        x[...] = produce(step)
        p.Start(); p.Wait()                            # y holds this step's sum

Arguments are checked when the call is made; another rank's bad arguments
(or a mismatched call) raise from ``Wait``/``Test`` on every rank. A
persistent request is checked and agreed once, when it is made (a
collective call), and binds its plan to the buffers once. Progress is made
inside mpicoll calls (see :mod:`mpicoll.engine.nonblocking`).
"""
from mpi4py import MPI

from .engine import memo as _memo
from . import collectives as _c
from .engine.call import Call
from .engine.nonblocking import PersistentRequest, Request, testall, waitall

__all__ = ["Request", "PersistentRequest", "waitall", "testall",
           "ibcast", "ireduce", "iallreduce", "igather", "iallgather", "iscatter",
           "ireduce_scatter_block", "ireduce_scatter", "ialltoall", "ibarrier",
           "bcast_init", "reduce_init", "allreduce_init", "gather_init", "allgather_init",
           "scatter_init", "reduce_scatter_block_init", "reduce_scatter_init",
           "alltoall_init", "barrier_init"]


def _request(kind, primitive, impl, comm, *args):
    call = Call(primitive, comm, kind)
    out = impl(call, *args)
    call.request.result = out
    return call.request


def _pair(primitive, impl, signature_of, through=_memo.start):
    """The nonblocking and persistent functions of one blocking function.

    ``through``: :func:`mpicoll.engine.memo.start`, or its ``start_specs`` for calls
    whose buffers are v-buffer specs."""
    def start(*args, comm=None, algorithm=None, **kwargs):
        bufs, *rest = signature_of(*args, **kwargs)
        # Repeated identical calls replay the last one's bound program (mpicoll.engine.memo).
        return through(primitive, impl, comm, algorithm, bufs(), rest, rest)

    def init(*args, comm=None, algorithm=None, **kwargs):
        return _request("init", primitive, impl, comm, *signature_of(*args, **kwargs), algorithm)
    return start, init


def _name(fns, blocking, module=_c):
    """Name and document the pair made by :func:`_pair` after ``module.<blocking>``."""
    start, init = fns
    start.__name__ = start.__qualname__ = "i" + blocking
    init.__name__ = init.__qualname__ = blocking + "_init"
    sig = getattr(module, blocking).__doc__.splitlines()[0]
    start.__doc__ = (f"Nonblocking :func:`mpicoll.{blocking}` (same arguments): returns a "
                     f":class:`Request`; ``Wait()`` returns what {blocking} returns.\n\n{sig}")
    init.__doc__ = (f"Persistent :func:`mpicoll.{blocking}` (same arguments): returns a "
                    f":class:`PersistentRequest`; ``Start()`` then ``Wait()``, many times.\n\n{sig}")
    return fns


def _bcast_args(buf, root=0):
    return (lambda: (buf,)), root


def _reduce_args(sendbuf, recvbuf=None, op=MPI.SUM, root=0):
    return (lambda: (sendbuf, recvbuf)), op, root


def _allreduce_args(sendbuf, recvbuf=None, op=MPI.SUM):
    return (lambda: (sendbuf, recvbuf)), op


def _rooted_args(sendbuf, recvbuf=None, root=0):
    return (lambda: (sendbuf, recvbuf)), root


def _scatter_args(sendbuf, recvbuf, root=0):
    return (lambda: (sendbuf, recvbuf)), root


def _two_args(sendbuf, recvbuf=None):
    return ((lambda: (sendbuf, recvbuf)),)


def _rsb_args(sendbuf, recvbuf=None, op=MPI.SUM):
    return (lambda: (sendbuf, recvbuf)), None, op


def _rs_args(sendbuf, recvbuf=None, recvcounts=None, op=MPI.SUM):
    return (lambda: (sendbuf, recvbuf)), recvcounts, op


def _no_args():
    return ((lambda: ()),)


ibcast, bcast_init = _name(_pair("bcast", _c._bcast, _bcast_args), "bcast")
ireduce, reduce_init = _name(_pair("reduce", _c._reduce, _reduce_args), "reduce")
iallreduce, allreduce_init = _name(_pair("allreduce", _c._allreduce, _allreduce_args), "allreduce")
igather, gather_init = _name(_pair("gather", _c._gather, _rooted_args), "gather")
iallgather, allgather_init = _name(_pair("allgather", _c._allgather, _two_args), "allgather")
iscatter, scatter_init = _name(_pair("scatter", _c._scatter, _scatter_args), "scatter")
ireduce_scatter_block, reduce_scatter_block_init = _name(
    _pair("reduce_scatter", _c._reduce_scatter, _rsb_args), "reduce_scatter_block")
ireduce_scatter, reduce_scatter_init = _name(
    _pair("reduce_scatter", _c._reduce_scatter, _rs_args), "reduce_scatter")
ialltoall, alltoall_init = _name(_pair("alltoall", _c._alltoall, _two_args), "alltoall")
ibarrier, barrier_init = _name(_pair("barrier", _c._barrier_bufs, _no_args), "barrier")
