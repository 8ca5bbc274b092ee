"""The algorithm arguments of a vector collective or scan call, without a communicator.

:func:`call_arrays_v` is :func:`mpicoll.sched.inspect.call_arrays` for the
primitives of :data:`mpicoll._registry.EXTENDED_PRIMITIVES`: arrays stand as
lengths, the rest as :mod:`mpicoll.vcollectives` passes it, so that
``plan_of("allgatherv", "bruck", size=5, rank=2, count=3)`` records the plan
the bench's plan model and the demo read.
"""
from mpi4py import MPI

from .coll._common import offsets

__all__ = ["call_arrays_v"]


class _Len:
    """Stands for an array of ``size`` elements while a plan is recorded."""

    __slots__ = ("size",)

    def __init__(self, size):
        self.size = size


def call_arrays_v(primitive, size, rank, count, root=0, counts=None, op=MPI.SUM):
    """Arguments of one call, arrays as lengths.

    ``count``: elements of each rank's block (gatherv, scatterv, allgatherv;
    the bench's equal blocks, back to back) or of the vector (scan, exscan).
    ``counts``, when given, are the per-rank block counts instead; for
    alltoallv ``counts[j]`` is what every rank sends to rank j (so rank i
    receives ``counts[i]`` from each), default ``count`` everywhere.
    """
    A = _Len
    if primitive in ("scan", "exscan"):
        return (A(count), A(count), op)
    cs = [count] * size if counts is None else [int(c) for c in counts]
    at = offsets(cs)[:-1]
    total = sum(cs)
    if primitive == "gatherv":
        is_root = rank == root
        return (A(cs[rank]), A(total) if is_root else None, cs, at if is_root else None, root)
    if primitive == "scatterv":
        is_root = rank == root
        return (A(total) if is_root else None, A(cs[rank]), cs, at if is_root else None, root)
    if primitive == "allgatherv":
        return (A(cs[rank]), A(total), cs, at)
    if primitive == "alltoallv":
        rc = [cs[rank]] * size
        return (A(total), A(sum(rc)), cs, at, rc, offsets(rc)[:-1])
    raise ValueError(f"primitive: unknown {primitive!r}")
