"""The declared cost of a case: its algorithm's :class:`~mpicoll.coll.cost.Cost` at its shape."""
from mpicoll.coll.cost import Call

from ._mpicoll import lookup, split
from .spec import layout_of, v_counts

__all__ = ["call_of", "declared", "cost_of"]


def cost_of(primitive, algorithm):
    """The registered :class:`~mpicoll.coll.cost.Cost` of an algorithm, or None."""
    return getattr(lookup(primitive, algorithm), "cost", None)


def _options(algorithm):
    base, _, text = algorithm.partition(":")
    opts = {}
    for item in filter(None, text.split(",")):
        k, _, v = item.partition("=")
        opts[k.strip()] = v.strip()
    return opts


def call_of(case):
    """The :class:`~mpicoll.coll.cost.Call` a case's cost is declared for."""
    p, N, n = case.primitive, case.N, case.count
    counts = None
    if p == "reduce_scatter":
        counts = split(n, N) if case.vcounts == "even" else v_counts(case.vcounts, n, N)
        n = sum(counts)
    elif p in ("gatherv", "scatterv", "allgatherv"):
        counts = v_counts(case.vcounts, n, N)
    elif p == "alltoallv":
        if case.vcounts == "even":
            counts = [[n] * N for _ in range(N)]
        else:
            counts = [[(n + i + 2 * j) % (n + 2) for j in range(N)] for i in range(N)]
    return Call(N, n, case.root, case.itemsize, counts, case.op != "noncomm",
                layout_of(case.layout, N), _options(case.algorithm))


def declared(case):
    """``((msgs, elems, reduced, alpha, beta, gamma), why_inexact)``, or None without a Cost.

    The first three are the busiest rank's load, the last three the critical path.
    """
    cost = cost_of(case.primitive, case.algorithm)
    if cost is None:
        return None
    k = call_of(case)
    why = cost.why_inexact(k)
    if why:
        return None, why
    load = cost.load(k) if not cost.why_load_inexact(k) else (None, None, None)
    return load + cost.terms(k), None
