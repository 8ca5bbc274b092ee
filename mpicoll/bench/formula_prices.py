"""Prices from the declared formulas: each algorithm's α-β-γ ``Cost``, in seconds.

Names: an algorithm *declares* its cost (:class:`mpicoll.coll.cost.Cost`); the bench
*prices* it, from the formula here or from its recorded plans (:mod:`.plan_prices`); the
verifier checks the declaration (:mod:`mpicoll.verify.declared`).

The formulas are not written here: every algorithm declares its cost beside
itself (``@register(..., cost=Cost(...))``, :mod:`mpicoll.coll.cost`), the
docstring's ``Cost:`` formula as functions, and ``python -m mpicoll.verify``
checks each declaration against the algorithm's recorded plans up to 1024
ranks. :data:`COSTS` reads them for the algorithms whose messages the
two-level split below knows.

``cost(primitive, algorithm, N, n, alpha, beta, gamma)`` -> seconds, with
``n`` in each primitive's own unit (the ``nbytes`` mpicoll's ``auto`` sees):
the whole vector for bcast, reduce, allreduce and reduce_scatter; one rank's
block for gather, allgather, scatter and alltoall; 0 for barrier.
α: seconds per message, β: seconds per byte sent, γ: seconds per byte reduced.

Two levels (``cost2``): on N ranks placed in blocks of K per node, each
formula is split by :func:`link_split` into the messages of its busiest rank
that stay inside a node and those that cross nodes::

    cost2 = cost(α_intra, β_intra, γ) + E_α·(α' - α_intra) + E_β·(β' - β_intra)
    α' = max(α_inter, c·α_link),  β' = max(β_inter, c·β_link)

E_α: how many of the formula's messages cross nodes, E_β: their bytes, c:
the ranks of a node that cross at once (K for the exchange patterns where
every rank talks across nodes — recursive doubling/halving, Bruck,
pairwise, dissemination — and 1 for trees, rings, chains and the root of
the linear algorithms). With equal levels and no link terms, cost2 is
exactly ``cost`` (the correction is 0.0). The split follows the message
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
from functools import lru_cache
from math import ceil, log2

from mpicoll.coll.cost import Call
from mpicoll.core.registry import lookup
from mpicoll.sched import inspect as _inspect  # noqa: F401  (fills the registry)

__all__ = ["COSTS", "cost", "has_cost", "link_split", "has_link_split", "cost2"]


def _lg(n):
    return ceil(log2(n)) if n > 1 else 0


def _p(n):
    return 1 << (n.bit_length() - 1)


def has_cost(primitive, algorithm):
    """True when ``algorithm`` of ``primitive`` has a formula in :data:`COSTS`."""
    return algorithm in COSTS.get(primitive, {})


def cost(primitive, algorithm, N, n, alpha, beta, gamma):
    """Predicted seconds of one call (without mpicoll's per-call overhead)."""
    return COSTS[primitive][algorithm](N, n, alpha, beta, gamma)


# -- two levels: which of a formula's messages cross nodes -------------------

def _pow2s(n):
    """1, 2, 4, ... below n."""
    d = 1
    while d < n:
        yield d
        d <<= 1


class _Split:
    __slots__ = ("ea", "eb", "c")

    def __init__(self):
        self.ea, self.eb, self.c = 0, 0.0, 1

    def tree(self, N, K, size):
        """Binomial tree steps at distance 1, 2, 4, ... < N; ``size(d)`` bytes at d."""
        low = K & -K                 # distance d stays in the node iff 2d | K iff d < low
        for d in _pow2s(N):
            if d >= low:
                self.ea += 1
                self.eb += size(d)
        return self

    def xor(self, N, K, size):
        """Recursive doubling/halving on the p = 2^⌊log2 N⌋ virtual ranks.

        Every rank exchanges with virtual rank XOR d, d = 1 .. p/2, a node's ranks at once.
        """
        across = _xor_across(N, K)
        for d in across:
            self.ea += 1
            self.eb += size(d)
        if across:
            self.c = max(self.c, K)
        return self

    def vtree(self, N, K, size):
        """A binomial tree on the virtual ranks of :meth:`xor` (Rabenseifner's gather)."""
        for d in _xor_across(N, K):
            self.ea += 1
            self.eb += size(d)
        return self

    def ring(self, steps, size):
        self.ea += steps
        self.eb += steps * size
        return self

    def linear(self, N, K, size):
        """The root's messages to (from) the N - K ranks off its node."""
        self.ea += N - K
        self.eb += (N - K) * size
        return self

    def shift(self, K, sizes):
        """Exchanges with rank ± k: every rank crosses at some step, K per node at once."""
        for s in sizes:
            self.ea += 1
            self.eb += s
        self.c = max(self.c, K)
        return self

    def shift_all(self, K, steps, size):
        """``steps`` exchanges of ``size`` bytes with rank ± k (pairwise: k = 1 .. N-1)."""
        self.ea += steps
        self.eb += steps * size
        self.c = max(self.c, K)
        return self

    def shared(self, c):
        """At least ``c`` ranks of a node cross nodes during the call."""
        self.c = max(self.c, c)
        return self

    def fold(self, N, K, size, times=1):
        """Pairs (2i, 2i+1), i < N - p, of a non-power-of-two N.

        One crosses nodes when K is odd and K < 2(N - p).
        """
        if K % 2 and K < 2 * (N - _p(N)):
            self.ea += times
            self.eb += times * size
        return self


@lru_cache(maxsize=65536)
def _xor_across(N, K):
    """The distances d < p at which some virtual pair (v, v XOR d) lies on two nodes.

    Virtual rank v is real rank 2v + 1 for v < N - p (after the fold), v + N - p
    above; at powers of two: the d >= (lowest set bit of K).
    """
    p = _p(N)
    if N == p:
        low = K & -K
        return tuple(d for d in _pow2s(p) if d >= low)
    import numpy as np
    rem = N - p
    v = np.arange(p)
    node = np.where(v < rem, 2 * v + 1, v + rem) // K
    return tuple(d for d in _pow2s(p) if (node != node[v ^ d]).any())


def _bruck_blocks(N, k):
    """#{i < N: bit k of i set} (k a power of two)."""
    return (N // (2 * k)) * k + max(0, N % (2 * k) - k)


def _pipeline_split(N, K, n):
    s = max(1, ceil(n / 65536))
    sp = _Split()
    sp.ea = (ceil(N / K) - 1) + (s - 1)      # hops between nodes, and the slowest link's S - 1
    sp.eb = sp.ea * n / s
    return sp


def _S():
    return _Split()


LINKS = {
    "bcast": {
        "linear": lambda N, K, n: _S().linear(N, K, n),
        "binomial": lambda N, K, n: _S().tree(N, K, lambda d: n),
        # the root (scatter) and the node's last rank (ring) send across nodes
        "scatter_allgather": lambda N, K, n: _S().tree(N, K, lambda d: min(d, N - d) * n / N)
        .ring(N - 1, n / N).shared(min(K, 2)),
        "pipeline": _pipeline_split,
    },
    "reduce": {
        "linear": lambda N, K, n: _S().linear(N, K, n),
        "binomial": lambda N, K, n: _S().tree(N, K, lambda d: n),
        "rabenseifner": lambda N, K, n: _S().fold(N, K, n)
        .xor(N, K, lambda d: d * n / _p(N)).vtree(N, K, lambda d: d * n / _p(N)),
    },
    "allreduce": {
        "reduce_bcast": lambda N, K, n: _S().tree(N, K, lambda d: n).tree(N, K, lambda d: n),
        "recursive_doubling": lambda N, K, n: _S().fold(N, K, n, 2).xor(N, K, lambda d: n),
        "ring": lambda N, K, n: _S().ring(2 * (N - 1), n / N),
        "rabenseifner": lambda N, K, n: _S().fold(N, K, n, 2)
        .xor(N, K, lambda d: d * n / _p(N)).xor(N, K, lambda d: d * n / _p(N)),
    },
    "gather": {
        "linear": lambda N, K, n: _S().linear(N, K, n),
        "binomial": lambda N, K, n: _S().tree(N, K, lambda d: min(d, N - d) * n),
    },
    "allgather": {
        "ring": lambda N, K, n: _S().ring(N - 1, n),
        "recursive_doubling": lambda N, K, n: _S().fold(N, K, n).fold(N, K, N * n)
        .xor(N, K, lambda d: d * N / _p(N) * n),
        "bruck": lambda N, K, n: _S().shift(K, [min(k, N - k) * n for k in _pow2s(N)]),
        "gather_bcast": lambda N, K, n: _S().tree(N, K, lambda d: min(d, N - d) * n)
        .tree(N, K, lambda d: N * n),
    },
    "scatter": {
        "linear": lambda N, K, n: _S().linear(N, K, n),
        "binomial": lambda N, K, n: _S().tree(N, K, lambda d: min(d, N - d) * n),
    },
    "reduce_scatter": {
        "ring": lambda N, K, n: _S().ring(N - 1, n / N),
        "recursive_halving": lambda N, K, n: _S().fold(N, K, n).fold(N, K, n / N)
        .xor(N, K, lambda d: d * n / _p(N)),
        "pairwise": lambda N, K, n: _S().shift_all(K, N - 1, n / N),
        "reduce_scatterv": lambda N, K, n: _S().tree(N, K, lambda d: n).linear(N, K, n / N),
    },
    "alltoall": {
        "pairwise": lambda N, K, n: _S().shift_all(K, N - 1, n),
        "bruck": lambda N, K, n: _S().shift(K, [_bruck_blocks(N, k) * n for k in _pow2s(N)]),
    },
    "barrier": {
        "linear": lambda N, K, n: _S().linear(N, K, 0).linear(N, K, 0),
        "binomial": lambda N, K, n: _S().tree(N, K, lambda d: 0).tree(N, K, lambda d: 0),
        "dissemination": lambda N, K, n: _S().shift_all(K, _lg(N), 0),
    },
}


def _formula(decl):
    """``(N, n, α, β, γ) -> seconds`` of a declared :class:`~mpicoll.coll.cost.Cost`.

    ``n`` is in bytes: the formula is read with one-byte elements.
    """
    def formula(N, n, a, b, g):
        return decl.time(Call(N, n, itemsize=1, counts=[n] * N), a, b, g)
    return formula


def _costs():
    """The formulas of the algorithms the two-level split covers, from their declarations."""
    table = {}
    for primitive, algs in LINKS.items():
        for algorithm in algs:
            decl = getattr(lookup(primitive, algorithm), "cost", None)
            if decl is not None:
                table.setdefault(primitive, {})[algorithm] = _formula(decl)
    return table


#: ``COSTS[primitive][algorithm](N, n, α, β, γ)``: seconds, read off each algorithm's
#: declared cost (:mod:`mpicoll.coll.cost`, beside the algorithm).
COSTS = _costs()


def has_link_split(primitive, algorithm):
    """True when ``algorithm`` of ``primitive`` has a two-level split (:func:`link_split`)."""
    return algorithm in LINKS.get(primitive, {})


def link_split(primitive, algorithm, N, K, n):
    """(E_α, E_β, c) of the formula on N ranks in blocks of K per node (see the module doc).

    (0, 0.0, 1) on one node (N <= K).
    """
    if N <= K:
        return 0, 0.0, 1
    sp = LINKS[primitive][algorithm](N, K, n)
    return sp.ea, sp.eb, sp.c


def cost2(primitive, algorithm, N, K, n, lv):
    """Two-level seconds of one call (``lv``: :class:`mpicoll.bench.plan_prices.Levels`)."""
    one = cost(primitive, algorithm, N, n, lv.alpha_intra, lv.beta_intra, lv.gamma)
    ea, eb, c = link_split(primitive, algorithm, N, K, n)
    if not ea and not eb:
        return one
    a, b = lv.inter(c)
    return one + ea * (a - lv.alpha_intra) + eb * (b - lv.beta_intra)
