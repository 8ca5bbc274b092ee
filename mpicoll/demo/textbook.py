"""Textbook traffic of the hand-written algorithms: the demo's traffic table's independent check.

Each entry states, for the even case, what some rank (or all ranks together)
sends or receives, as the algorithm's textbook cost puts it -- written down
here from the literature, not derived from the code. The demo measures each
call (:func:`mpicoll.traffic`), reads the exact per-rank traffic off the
algorithm's recorded plan (:mod:`mpicoll.sched`; it must equal the measured
counters) and compares the plan with the textbook value where the formula
applies. An algorithm without an entry here (a new one, a plug-in) is still
measured and checked against its plan; its textbook column shows "—".

Sizes: ``k`` is the length of each rank's vector (bcast, reduce, allreduce,
reduce_scatter) or of the full N-block vector (gather, allgather, scatter,
alltoall, whose blocks have ``k // n`` elements).
"""
from fractions import Fraction

from ..core.blocks import fold_rank, pof2_below

__all__ = ["TEXTBOOK", "Textbook", "check_textbook", "block_primitive", "chunks_text"]

#: Primitives whose buffers are N blocks; the table gives each block ``k // n`` elements.
BLOCK_PRIMITIVES = ("gather", "allgather", "scatter", "alltoall")


def block_primitive(primitive):
    """True for primitives whose vector is N blocks (one per rank)."""
    return primitive in BLOCK_PRIMITIVES


def ceil_log2(n):
    """⌈log2 n⌉ for n >= 1 (0 for n = 1)."""
    return (n - 1).bit_length()


def _is_pof2(n):
    return n & (n - 1) == 0


# -- textbook formulas ------------------------------------------------------

class Textbook:
    """One algorithm's textbook claim about its traffic.

    ``who``: ``each`` (every rank), ``root``, ``rank0`` or ``total`` (all
    ranks together); ``what``: ``sent``/``recv`` elements or ``msgs`` sent.
    ``value(n, k)`` is the claimed amount; ``applies(n, k, root)`` returns
    ``"exact"`` when the formula is exactly what the algorithm does,
    ``"mean"`` when it is the exact mean over the ranks (uneven chunks), or a
    string saying why it does not apply.
    """

    __slots__ = ("primitive", "algorithm", "text", "who", "what", "value", "applies")

    def __init__(self, primitive, algorithm, text, who, what, value, applies):
        self.primitive, self.algorithm = primitive, algorithm
        self.text, self.who, self.what, self.value, self.applies = text, who, what, value, applies


def _always(n, k, root):
    return "exact"


def _even(n, k, root):
    return "exact" if k % n == 0 else f"uneven chunks: {chunks_text(k, n)}"


def _even_or_mean(n, k, root):
    return "exact" if k % n == 0 else "mean"


def _pof2(n, k, root):
    return "exact" if _is_pof2(n) else "N is not a power of 2"


def _pof2_even_or_mean(n, k, root):
    if not _is_pof2(n):
        return "N is not a power of 2"
    return "exact" if k % n == 0 else "mean"


def _rabenseifner_root(n, k, root):
    p = pof2_below(n)
    if fold_rank(root, n - p) < 0:
        return "the root is folded out"
    return "exact" if k % p == 0 else f"uneven chunks: {chunks_text(k, p)}"


def chunks_text(k, n):
    """``split(k, n)`` in words: "1 of 2, 3 of 1" (the first k % n chunks one larger)."""
    q, r = divmod(k, n)
    return f"{r} of {q + 1}, {n - r} of {q}" if r else f"{n} of {q}"


F = Fraction
_P2 = pof2_below

#: ``"primitive/algorithm"`` -> its :class:`Textbook` claim.
TEXTBOOK = {t.primitive + "/" + t.algorithm: t for t in [
    Textbook("bcast", "linear", "(N-1)K", "root", "sent",
             lambda n, k: F((n - 1) * k), _always),
    Textbook("bcast", "binomial", "ceil(log2 N)K", "root", "sent",
             lambda n, k: F(ceil_log2(n) * k), _always),
    Textbook("bcast", "scatter_allgather", "2(N-1)K/N", "root", "sent",
             lambda n, k: F(2 * (n - 1) * k, n), _even),
    Textbook("bcast", "pipeline", "(N-1)K", "total", "sent",
             lambda n, k: F((n - 1) * k), _always),
    Textbook("reduce", "linear", "(N-1)K", "root", "recv",
             lambda n, k: F((n - 1) * k), _always),
    Textbook("reduce", "binomial", "(N-1)K", "total", "sent",
             lambda n, k: F((n - 1) * k), _always),
    Textbook("reduce", "rabenseifner", "(p-1)K/p", "root", "sent",
             lambda n, k: F((_P2(n) - 1) * k, _P2(n)), _rabenseifner_root),
    Textbook("allreduce", "reduce_bcast", "2(N-1)K", "total", "sent",
             lambda n, k: F(2 * (n - 1) * k), _always),
    Textbook("allreduce", "recursive_doubling", "K log2 N", "each",
             "sent", lambda n, k: F(k * ceil_log2(n)), _pof2),
    Textbook("allreduce", "ring", "2(N-1)K/N", "each", "sent",
             lambda n, k: F(2 * (n - 1) * k, n), _even_or_mean),
    Textbook("allreduce", "rabenseifner", "2(N-1)K/N", "each", "sent",
             lambda n, k: F(2 * (n - 1) * k, n), _pof2_even_or_mean),
    Textbook("gather", "linear", "(N-1)K/N", "root", "recv",
             lambda n, k: F((n - 1) * k, n), _always),
    Textbook("gather", "binomial", "(N-1)K/N", "root", "recv",
             lambda n, k: F((n - 1) * k, n), _always),
    Textbook("allgather", "ring", "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Textbook("allgather", "recursive_doubling", "(N-1)K/N", "each",
             "sent", lambda n, k: F((n - 1) * k, n), _pof2),
    Textbook("allgather", "bruck", "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Textbook("allgather", "gather_bcast", "ceil(log2 N)K", "rank0", "sent",
             lambda n, k: F(ceil_log2(n) * k), _always),
    Textbook("scatter", "linear", "(N-1)K/N", "root", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Textbook("scatter", "binomial", "(N-1)K/N", "root", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Textbook("reduce_scatter", "ring", "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _even_or_mean),
    Textbook("reduce_scatter", "recursive_halving", "(N-1)K/N",
             "each", "sent", lambda n, k: F((n - 1) * k, n), _pof2_even_or_mean),
    Textbook("reduce_scatter", "pairwise", "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _even_or_mean),
    Textbook("reduce_scatter", "reduce_scatterv", "(N-1)K + (N-1)K/N", "total", "sent",
             lambda n, k: F((n - 1) * k) + F((n - 1) * k, n), _even),
    Textbook("alltoall", "pairwise", "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Textbook("alltoall", "bruck", "(K/2) log2 N", "each", "sent",
             lambda n, k: F(k * ceil_log2(n), 2), _pof2),
    Textbook("barrier", "linear", "N-1", "rank0", "msgs",
             lambda n, k: F(n - 1), _always),
    Textbook("barrier", "binomial", "2(N-1)", "total", "msgs",
             lambda n, k: F(2 * (n - 1)), _always),
    Textbook("barrier", "dissemination", "ceil(log2 N)", "each", "msgs",
             lambda n, k: F(ceil_log2(n)), _always),
]}


def check_textbook(book, counts, n, k, root):
    """Compare the exact per-rank counts with a formula.

    ``counts``: a dict of lists (sent, recv, sent_msgs, recv_msgs).

    Returns ``(applies, ok)``: how the formula applies ("exact", "mean" or
    the reason it does not) and whether the exact counts agree (None when
    it does not apply).
    """
    applies = book.applies(n, k, root)
    values = counts["sent_msgs" if book.what == "msgs" else book.what]
    want = book.value(n, k)
    if applies not in ("exact", "mean"):
        return applies, None
    if book.who == "total":
        return applies, sum(values) == want
    if book.who in ("root", "rank0"):
        return applies, values[root if book.who == "root" else 0] == want
    if applies == "mean":
        return applies, F(sum(values), n) == want
    return applies, all(v == want for v in values)
