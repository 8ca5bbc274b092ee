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
from collections.abc import Mapping
from fractions import Fraction as F

from ..coll.textbook import Textbook, ceil_log2, chunks_text
from ..core.errors import ArgumentError
from ..core.registry import PRIMITIVES, algorithms, lookup

__all__ = ["TEXTBOOK", "Textbook", "check_textbook", "block_primitive", "chunks_text",
           "ceil_log2"]

#: Primitives whose buffers are N blocks; the table gives each block ``k // n`` elements.
BLOCK_PRIMITIVES = ("gather", "allgather", "scatter", "alltoall")


def block_primitive(primitive):
    """True for primitives whose vector is N blocks (one per rank)."""
    return primitive in BLOCK_PRIMITIVES


class _Claims(Mapping):
    """``"primitive/algorithm"`` -> its registered :class:`Textbook`, read from the registry."""

    def _items(self):
        for p in PRIMITIVES:
            for a in algorithms(p):
                book = getattr(lookup(p, a), "textbook", None)
                if book is not None:
                    yield f"{p}/{a}", book

    def __getitem__(self, key):
        p, _, a = key.partition("/")
        try:
            book = getattr(lookup(p, a), "textbook", None)
        except ArgumentError:          # no such primitive or algorithm
            book = None
        if book is None:
            raise KeyError(key)
        return book

    def __iter__(self):
        return (k for k, _ in self._items())

    def __len__(self):
        return sum(1 for _ in self._items())


#: ``"primitive/algorithm"`` -> its :class:`Textbook` claim (those the algorithms declare).
TEXTBOOK = _Claims()


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
