"""Textbook traffic of the hand-written algorithms: the demo's traffic table's independent check.

Each algorithm declares its claim with itself (``register(..., textbook=Textbook(...))``,
:mod:`mpicoll.coll.textbook`): for the even case, what some rank (or all ranks
together) sends or receives, as the algorithm's textbook cost puts it -- written
from the literature, not derived from the code. The demo measures each call
(:func:`mpicoll.traffic`), reads the exact per-rank traffic off the algorithm's
recorded plan (:mod:`mpicoll.sched`; it must equal the measured counters) and
compares the plan with the claim where the formula applies (:func:`check_textbook`).
An algorithm without a claim (a new one, a plug-in) is still measured and checked
against its plan; its textbook column shows "—".

Sizes: ``k`` is the length of each rank's vector (bcast, reduce, allreduce,
reduce_scatter) or of the full N-block vector (gather, allgather, scatter,
alltoall, whose blocks have ``k // n`` elements).
"""
from fractions import Fraction as F

from ..coll.textbook import Textbook, ceil_log2, chunks_text
from ..core.errors import ArgumentError
from ..core.registry import PRIMITIVES, algorithms, lookup
from ..core.views import LiveView

__all__ = ["TEXTBOOK", "Textbook", "check_textbook", "block_primitive", "chunks_text",
           "ceil_log2"]

#: Primitives whose buffers are N blocks; the table gives each block ``k // n`` elements.
BLOCK_PRIMITIVES = ("gather", "allgather", "scatter", "alltoall")


def block_primitive(primitive):
    """True for primitives whose vector is N blocks (one per rank)."""
    return primitive in BLOCK_PRIMITIVES


def _claim_keys():
    return (f"{p}/{a}" for p in PRIMITIVES for a in algorithms(p))


def _claim(key):
    """The :class:`Textbook` registered with ``"primitive/algorithm"``, or None."""
    p, _, a = key.partition("/")
    try:
        return getattr(lookup(p, a), "textbook", None)
    except ArgumentError:          # no such primitive or algorithm
        return None


#: ``"primitive/algorithm"`` -> its :class:`Textbook` claim (those the algorithms declare).
TEXTBOOK = LiveView(_claim_keys, _claim)


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
