"""Textbook traffic claims, declared with each algorithm: the demo's independent check.

An algorithm states, beside its ``Cost``, what its textbook says it sends::

    @register("allgather", "ring", cost=Cost(...),
              textbook=Textbook("(N-1)K/N", "each", "sent",
                                lambda n, k: F((n - 1) * k, n), always))

The claim is written from the literature, not derived from the code: the demo
(:mod:`mpicoll.demo.table`) measures each call, reads the exact per-rank
traffic off the algorithm's recorded plan, and compares the plan with the
claim where the formula applies (:func:`mpicoll.demo.textbook.check_textbook`).
An algorithm without a claim (a new one, a plug-in) is still measured and
checked against its plan; its textbook column shows "—".

Sizes: ``k`` is the length of each rank's vector (bcast, reduce, allreduce,
reduce_scatter) or of the full N-block vector (gather, allgather, scatter,
alltoall, whose blocks have ``k // n`` elements).
"""
from fractions import Fraction as F

from ..core.blocks import fold_rank, pof2_below

__all__ = ["Textbook", "F", "ceil_log2", "pof2_below", "chunks_text", "always", "even_chunks",
           "even_or_mean", "pof2", "pof2_even_or_mean", "rabenseifner_root"]


class Textbook:
    """One algorithm's textbook claim about its traffic.

    ``text``: the formula as the table prints it; ``who``: ``each`` (every rank),
    ``root``, ``rank0`` or ``total`` (all ranks together); ``what``: ``sent``/``recv``
    elements or ``msgs`` sent. ``value(n, k)`` is the claimed amount;
    ``applies(n, k, root)`` returns ``"exact"`` when the formula is exactly what the
    algorithm does, ``"mean"`` when it is the exact mean over the ranks (uneven chunks),
    or a string saying why it does not apply. ``primitive`` and ``algorithm`` are set
    by :func:`mpicoll.core.registry.register`.
    """

    __slots__ = ("primitive", "algorithm", "text", "who", "what", "value", "applies")

    def __init__(self, text, who, what, value, applies):
        self.primitive = self.algorithm = None
        self.text, self.who, self.what, self.value, self.applies = text, who, what, value, applies


def ceil_log2(n):
    """⌈log2 n⌉ for n >= 1 (0 for n = 1)."""
    return (n - 1).bit_length()


def _is_pof2(n):
    return n & (n - 1) == 0


def chunks_text(k, n):
    """``split(k, n)`` in words: "1 of 2, 3 of 1" (the first k % n chunks one larger)."""
    q, r = divmod(k, n)
    return f"{r} of {q + 1}, {n - r} of {q}" if r else f"{n} of {q}"


# -- when a formula applies (the ``applies`` of a claim) ---------------------

def always(n, k, root):
    """The formula is exact at every N, size and root."""
    return "exact"


def even_chunks(n, k, root):
    """Exact when the vector splits into N equal chunks."""
    return "exact" if k % n == 0 else f"uneven chunks: {chunks_text(k, n)}"


def even_or_mean(n, k, root):
    """Exact for equal chunks, else the exact mean over the ranks."""
    return "exact" if k % n == 0 else "mean"


def pof2(n, k, root):
    """Exact when N is a power of two."""
    return "exact" if _is_pof2(n) else "N is not a power of 2"


def pof2_even_or_mean(n, k, root):
    """For N a power of two: exact for equal chunks, else the mean."""
    if not _is_pof2(n):
        return "N is not a power of 2"
    return "exact" if k % n == 0 else "mean"


def rabenseifner_root(n, k, root):
    """Rabenseifner's reduce: exact when the root is not folded out and chunks are equal."""
    p = pof2_below(n)
    if fold_rank(root, n - p) < 0:
        return "the root is folded out"
    return "exact" if k % p == 0 else f"uneven chunks: {chunks_text(k, p)}"
