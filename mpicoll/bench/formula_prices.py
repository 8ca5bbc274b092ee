"""Prices from the declared formulas: each algorithm's α-β-γ ``Cost``, in seconds.

Names: an algorithm *declares* its cost (:class:`mpicoll.coll.cost.Cost`); the bench
*prices* it, from the formula here or from its recorded plans (:mod:`.plan_prices`); the
verifier checks the declaration (:mod:`mpicoll.verify.declared`).

The formulas are not written here: every algorithm declares its cost beside
itself (``@register(..., cost=Cost(...))``, :mod:`mpicoll.coll.cost`), the
docstring's ``Cost:`` formula as functions, and ``python -m mpicoll.verify``
checks each declaration against the algorithm's recorded plans up to 1024
ranks. :data:`COSTS` reads them for the algorithms that also declare their
two-level split (below).

``cost(primitive, algorithm, N, n, alpha, beta, gamma)`` -> seconds, with
``n`` in each primitive's own unit (the ``nbytes`` mpicoll's ``auto`` sees):
the whole vector for bcast, reduce, allreduce and reduce_scatter; one rank's
block for gather, allgather, scatter and alltoall; 0 for barrier.
α: seconds per message, β: seconds per byte sent, γ: seconds per byte reduced.

Two levels (``cost2``): on N ranks placed in blocks of K per node, each
formula is split by :func:`link_split` into the messages of its busiest rank
that stay inside a node and those that cross nodes. The split is not written
here either: each algorithm declares it with its cost (``Cost(..., links=...)``,
built from the message patterns of :class:`mpicoll.coll.links.Split`), and
:func:`link_split` reads it from the registry::

    cost2 = cost(α_intra, β_intra, γ) + E_α·(α' - α_intra) + E_β·(β' - β_intra)
    α' = max(α_inter, c·α_link),  β' = max(β_inter, c·β_link)

E_α: how many of the formula's messages cross nodes, E_β: their bytes, c:
the ranks of a node that cross at once (K for the exchange patterns where
every rank talks across nodes — recursive doubling/halving, Bruck,
pairwise, dissemination — and 1 for trees, rings, chains and the root of
the linear algorithms). With equal levels and no link terms, cost2 is
exactly ``cost`` (the correction is 0.0). The splits follow the message
patterns of the algorithms with root 0:

- tree and recursive-doubling steps at distance d are inside a node when
  2d divides K (every pair of the step is on one node), else across;
- ring, chain, Bruck, pairwise and dissemination steps cross nodes for some
  rank at every step once there are two nodes (their busiest rank pays it);
- linear roots send to or receive from N - K ranks of other nodes;
- the fold of non-powers of two (pairs 2i, 2i+1) crosses nodes when K is odd.

Exact (equal to pricing every rank's recorded plan:
:func:`mpicoll.bench.plan_prices.plan_time2`) where N and K are powers of two and there is no
link sharing (tests/test_model_two_level.py checks it); for other N and K an
estimate (a step counted across nodes when any of its pairs crosses).
"""
from mpicoll.coll.cost import Call
from mpicoll.core.errors import ArgumentError
from mpicoll.core.registry import PRIMITIVES, table
from mpicoll.sched import inspect as _inspect  # noqa: F401  (fills the registry)

__all__ = ["COSTS", "cost", "has_cost", "link_split", "has_link_split", "cost2"]


def has_cost(primitive, algorithm):
    """True when ``algorithm`` of ``primitive`` has a formula in :data:`COSTS`."""
    return algorithm in COSTS.get(primitive, {})


def cost(primitive, algorithm, N, n, alpha, beta, gamma):
    """Predicted seconds of one call (without mpicoll's per-call overhead)."""
    return COSTS[primitive][algorithm](N, n, alpha, beta, gamma)


def _formula(decl):
    """``(N, n, α, β, γ) -> seconds`` of a declared :class:`~mpicoll.coll.cost.Cost`.

    ``n`` is in bytes: the formula is read with one-byte elements.
    """
    def formula(N, n, a, b, g):
        return decl.time(Call(N, n, itemsize=1, counts=[n] * N), a, b, g)
    return formula


def _links(primitive, algorithm):
    """The two-level split ``algorithm`` declares with its cost (``Cost(..., links=...)``).

    None for an algorithm without one, an unknown name or a configured variant
    (``"name:key=value"``: none is made here).
    """
    try:
        fn = table(primitive).get(algorithm)
    except ArgumentError:
        return None
    return getattr(getattr(fn, "cost", None), "links", None)


def _costs():
    """The formulas of the algorithms that declare a two-level split, from their declarations."""
    costs = {}
    for primitive in PRIMITIVES:
        for algorithm, fn in table(primitive).items():
            if _links(primitive, algorithm) is not None:
                costs.setdefault(primitive, {})[algorithm] = _formula(fn.cost)
    return costs


#: ``COSTS[primitive][algorithm](N, n, α, β, γ)``: seconds, read off each algorithm's
#: declared cost (:mod:`mpicoll.coll.cost`, beside the algorithm).
COSTS = _costs()


def has_link_split(primitive, algorithm):
    """True when ``algorithm`` of ``primitive`` has a two-level split (:func:`link_split`)."""
    return _links(primitive, algorithm) is not None


def link_split(primitive, algorithm, N, K, n):
    """(E_α, E_β, c) of the formula on N ranks in blocks of K per node (see the module doc).

    (0, 0.0, 1) on one node (N <= K).
    """
    if N <= K:
        return 0, 0.0, 1
    links = _links(primitive, algorithm)
    if links is None:
        raise KeyError(f"{primitive} algorithm {algorithm!r} declares no two-level split")
    sp = links(N, K, n)
    return sp.ea, sp.eb, sp.c


def cost2(primitive, algorithm, N, K, n, lv):
    """Two-level seconds of one call (``lv``: :class:`mpicoll.bench.plan_prices.Levels`)."""
    one = cost(primitive, algorithm, N, n, lv.alpha_intra, lv.beta_intra, lv.gamma)
    ea, eb, c = link_split(primitive, algorithm, N, K, n)
    if not ea and not eb:
        return one
    a, b = lv.inter(c)
    return one + ea * (a - lv.alpha_intra) + eb * (b - lv.beta_intra)
