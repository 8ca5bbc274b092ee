"""Two-level splits: which of an algorithm's messages cross nodes.

An algorithm declares its split with its cost (``Cost(..., links=...)``,
:mod:`mpicoll.coll.cost`): ``links(N, K, n)`` returns a :class:`Split` of its
formula on N ranks placed in blocks of K per node, n bytes in the primitive's
own unit, built from the message patterns below (root 0)::

    links=lambda N, K, n: Split().tree(N, K, lambda d: n)

A split holds the formula's messages of its busiest rank that cross nodes
(``ea``: how many, ``eb``: their bytes) and ``c``, the ranks of a node that
cross at once (K for the exchange patterns where every rank talks across
nodes, 1 for trees, rings, chains and linear roots). The bench prices it
(:func:`mpicoll.bench.formula_prices.cost2`, whose module doc gives the model);
it is called only with two nodes or more (N > K).
"""
from functools import lru_cache
from math import ceil

from .cost import pof2

__all__ = ["Split", "pow2s", "blocks_with_bit"]


def pow2s(n):
    """1, 2, 4, ... below n."""
    d = 1
    while d < n:
        yield d
        d <<= 1


def blocks_with_bit(N, k):
    """#{i < N: bit k of i set} (k a power of two): the blocks of Bruck's step k."""
    return (N // (2 * k)) * k + max(0, N % (2 * k) - k)


class Split:
    """The inter-node part of one formula (see the module doc); each method adds a pattern."""

    __slots__ = ("ea", "eb", "c")

    def __init__(self):
        self.ea, self.eb, self.c = 0, 0.0, 1

    def tree(self, N, K, size):
        """Binomial tree steps at distance 1, 2, 4, ... < N; ``size(d)`` bytes at d."""
        low = K & -K                 # distance d stays in the node iff 2d | K iff d < low
        for d in pow2s(N):
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
        """``steps`` messages of ``size`` bytes to the next rank (its busiest rank crosses)."""
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
        if K % 2 and K < 2 * (N - pof2(N)):
            self.ea += times
            self.eb += times * size
        return self

    def chain(self, N, K, n, s):
        """A chain of ``s`` segments of n/s bytes through N ranks (the bcast pipeline).

        The ⌈N/K⌉ - 1 hops between nodes, and the slowest link's s - 1 further segments.
        """
        ea = (ceil(N / K) - 1) + (s - 1)
        self.ea += ea
        self.eb += ea * n / s
        return self


@lru_cache(maxsize=65536)
def _xor_across(N, K):
    """The distances d < p at which some virtual pair (v, v XOR d) lies on two nodes.

    Virtual rank v is real rank 2v + 1 for v < N - p (after the fold), v + N - p
    above; at powers of two: the d >= (lowest set bit of K).
    """
    p = pof2(N)
    if N == p:
        low = K & -K
        return tuple(d for d in pow2s(p) if d >= low)
    import numpy as np
    rem = N - p
    v = np.arange(p)
    node = np.where(v < rem, 2 * v + 1, v + rem) // K
    return tuple(d for d in pow2s(p) if (node != node[v ^ d]).any())
