"""A cost read off an algorithm's recorded plans: the model of algorithms without a formula.

:mod:`.costs` holds each built-in algorithm's α-β-γ formula as its docstring
states it. An algorithm registered without one (a plug-in, a new one) is not
left out of ``fit`` and ``predict``: its cost is taken from the plans
:func:`mpicoll.sched.inspect.plan_of` records for every rank, as the busiest
rank's load::

    cost = M α + B β + R γ

- M: the most messages one rank handles, a ``sendrecv`` counting once (its
  send and receive overlap) and every other send or receive once each;
- B: the most bytes one rank moves (a ``sendrecv``: the larger of its halves);
- R: the most bytes one rank reduces.

Each maximum is over the ranks separately. At powers of two it gives the
built-in formulas of :mod:`.costs` (tests/test_registry.py checks that) but
the pipeline's, whose fill time is waiting along a chain of ranks, which a
per-rank load does not see (reduce_scatterv's formula rounds the
(N-1)/N·nβ of its scatterv up to nβ).
"""
from functools import lru_cache

from mpicoll.sched.inspect import plan_of
from mpicoll.sched.plan import IRECV, ISEND, RECV, REDUCE, SEND, SENDRECV, NotSchedulable

from .costs import cost, has_cost

__all__ = ["load", "busiest", "plan_cost", "model_cost", "model_of", "plannable",
           "PLAN_MAX_RANKS", "count_of"]

#: ``predict`` reads plans up to this N: recording every rank's plan costs O(N) plans of
#: up to O(N) operations each (seconds per point beyond a few hundred ranks).
PLAN_MAX_RANKS = 64


def load(plan, itemsize):
    """(messages, bytes moved, bytes reduced) of one rank's plan (see the module doc)."""
    msgs = moved = reduced = 0
    for op in plan.ops:
        kind = op[0]
        if kind in (SEND, RECV, ISEND, IRECV):
            msgs += 1
            moved += op[1].size
        elif kind == SENDRECV:
            msgs += 1
            moved += max(op[1].size, op[3].size)
        elif kind == REDUCE:
            reduced += op[1].size
    return msgs, moved * itemsize, reduced * itemsize


def count_of(nbytes, itemsize):
    """Elements of ``nbytes`` (at least one when nbytes > 0), as the bench lays out a size."""
    return max(1, nbytes // itemsize) if nbytes else 0


@lru_cache(maxsize=8192)
def busiest(primitive, algorithm, nranks, count, itemsize):
    """(M, B, R): the maxima over the ranks of :func:`load`, for one call.

    ``count`` in :func:`~mpicoll.sched.inspect.plan_of`'s unit (the vector,
    one rank's block, or reduce_scatter's total).
    """
    loads = [load(plan_of(primitive, algorithm, nranks, r, count, itemsize=itemsize), itemsize)
             for r in range(nranks)]
    return tuple(max(x[i] for x in loads) for i in range(3))


@lru_cache(maxsize=None)
def plannable(primitive, algorithm):
    """Whether the algorithm records as a plan (one that does more than ``ctx`` does not).

    Tried on every rank of N = 3 and N = 4 with a few elements: what the
    algorithm does beyond ``ctx`` shows there as it would at any size.
    """
    try:
        for n in (3, 4):
            for r in range(n):
                plan_of(primitive, algorithm, n, r, 2 * n)
    except NotSchedulable:
        return False
    return True


def plan_cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma, itemsize=4):
    """Predicted seconds of one call from the plans (``nbytes`` in the costs' unit)."""
    m, b, r = busiest(primitive, algorithm, nranks, count_of(nbytes, itemsize), itemsize)
    return m * alpha + b * beta + r * gamma


def model_of(primitive, algorithm):
    """``"formula"`` (a cost in :mod:`.costs`) or ``"plan"`` (read off the recorded plans)."""
    return "formula" if has_cost(primitive, algorithm) else "plan"


def model_cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma, itemsize=4):
    """The formula when the algorithm has one, else :func:`plan_cost`."""
    if has_cost(primitive, algorithm):
        return cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma)
    return plan_cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma, itemsize)
