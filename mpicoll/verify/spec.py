"""Cases and specifications: the arguments of one call on every rank, and what it must leave.

A :class:`Case` names one call of one algorithm: N, count, root, op kind,
item size, in place or not, the v-counts and displacement patterns, and the
node layout of a node-aware algorithm. :func:`setup` turns it into what the
executor needs for every rank: the arguments the algorithm is recorded with
(arrays as lengths, exactly as the primitives in :mod:`mpicoll.calls` pass
them), the initial symbolic value of each
call buffer, and its expected final value -- the primitive's specification,
declared with the primitive (``symbolic`` in ``mpicoll/calls/<primitive>.py``,
given a :class:`Symbolic`; its docstring says what the call must leave, e.g.
"every recvbuf ends as all ranks' inputs reduced, in rank order").

Buffers that are only read (a sendbuf, the root's bcast buffer) have their
initial value as the expected one, so a write that changes them fails as an
overwrite of a final element.
"""
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from mpi4py import MPI

from ._mpicoll import DEFINED, Layout, LiveView, binder_parts, lookup, offsets, split
from .values import mode_for

__all__ = ["Case", "Setup", "Symbolic", "setup", "Having", "REDUCING", "ROOTED", "V_PRIMITIVES",
           "COUNTED", "IN_PLACE", "VECTOR", "DATALESS", "op_object", "layout_of", "v_counts",
           "displs_of"]

def Having(doc, test):
    """The defined primitives with a property, read from the primitives (plug-ins included).

    A live view: ``name in ROOTED``, ``list(ROOTED)``. The property is what the primitive
    declares in ``mpicoll/calls/<primitive>.py`` (see :class:`mpicoll.calls.Primitive`).
    """
    return LiveView(lambda: DEFINED,
                    lambda name: True if name in DEFINED and test(DEFINED[name]) else None, doc)


def _takes_counts(p):
    return p.vspecs or any(q.name == "recvcounts" for f in p.api for q in binder_parts(f)[0])


REDUCING = Having("Primitives whose algorithms take an op.", lambda p: p.reduces)
ROOTED = Having("Primitives with a root.", lambda p: p.spec is not None and p.spec.rooted)
V_PRIMITIVES = Having("Primitives whose buffers are v-buffer specs (counts and displacements).",
                      lambda p: p.vspecs)
#: Primitives taking per-rank counts (the v ones, reduce_scatter's ``recvcounts``).
COUNTED = Having("Primitives taking per-rank counts.", _takes_counts)
IN_PLACE = Having("In-place forms the API hands to the algorithms as such (the others get a "
                  "copy).", lambda p: p.in_place)
VECTOR = Having("Vector primitives: the count is the length of every rank's vector.",
                lambda p: p.count_kind == "vector")
DATALESS = Having("Primitives that move no data (barrier).", lambda p: p.count_kind is None)


_OPS = {}


def op_object(kind):
    """The MPI op standing for an op kind.

    ``sum`` (built-in), ``user`` (commutative user op), ``noncomm`` (non-commutative user
    op). Plans read only whether the op is a user op and whether it commutes; the
    functions are never called.
    """
    if kind == "sum":
        return MPI.SUM
    op = _OPS.get(kind)
    if op is None:
        def never(a, b, dt):        # pragma: no cover - plans hold no data
            raise AssertionError("symbolic plans do not reduce data")
        op = _OPS[kind] = MPI.Op.Create(never, commute=(kind == "user"))
    return op


@dataclass(frozen=True)
class Case:
    """One call to verify (all fields are part of its name; see :meth:`text`)."""

    primitive: str
    algorithm: str
    N: int
    count: int
    root: int = 0
    op: str = None            # None | "sum" | "user" | "noncomm"
    itemsize: int = 8
    inplace: bool = False
    vcounts: str = "even"     # even | ragged (v-collectives, reduce_scatter)
    displs: str = "packed"    # packed | gaps (v-collectives)
    layout: str = None        # None (one node) | block:K | cyclic:K | uneven
    eager: int = 0            # bytes sent eagerly; larger sends wait for their receive
    extra: tuple = field(default=(), compare=True)

    def text(self):
        """The case as ``python -m mpicoll.verify --case`` takes it."""
        parts = [f"{self.primitive}/{self.algorithm}", f"N={self.N}", f"count={self.count}"]
        if self.primitive in ROOTED:
            parts.append(f"root={self.root}")
        if self.op is not None:
            parts.append(f"op={self.op}")
        if self.itemsize != 8:
            parts.append(f"itemsize={self.itemsize}")
        if self.inplace:
            parts.append("inplace")
        if self.primitive in COUNTED:
            if self.vcounts != "even":
                parts.append(f"vcounts={self.vcounts}")
        if self.primitive in V_PRIMITIVES and self.displs != "packed":
            parts.append(f"displs={self.displs}")
        if self.layout:
            parts.append(f"layout={self.layout}")
        if self.eager:
            parts.append(f"eager={self.eager}")
        return " ".join(parts)

    __str__ = text

    @classmethod
    def parse(cls, text):
        """The inverse of :meth:`text`."""
        words = text.split()
        if not words or "/" not in words[0]:
            raise ValueError(f"case: expected 'primitive/algorithm key=value ...'; got {text!r}")
        prim, alg = words[0].split("/", 1)
        kw = {}
        for w in words[1:]:
            if w == "inplace":
                kw["inplace"] = True
                continue
            k, eq, v = w.partition("=")
            if not eq:
                raise ValueError(f"case: bad word {w!r}")
            if k in ("N", "count", "root", "itemsize", "eager"):
                kw[k] = int(v)
            elif k in ("op", "vcounts", "displs", "layout"):
                kw[k] = v
            else:
                raise ValueError(f"case: unknown key {k!r}")
        if "N" not in kw or "count" not in kw:
            raise ValueError("case: N= and count= are required")
        return cls(prim, alg, **kw)


@lru_cache(maxsize=512)
def layout_of(spec, N):
    """The :class:`Layout` of ``N`` ranks for a layout name, or None for one node.

    Immutable, so shared between cases.
    """
    if not spec:
        return None
    kind, _, k = spec.partition(":")
    if kind == "block":
        K = int(k)
        nodes = [r // K for r in range(N)]
    elif kind == "cyclic":
        K = int(k)
        nodes = [r % K for r in range(N)]
    elif kind == "uneven":
        # node sizes 1, 3, 2, 1, 3, 2, ... in rank order (the last one cut short)
        nodes, node, sizes = [], 0, (1, 3, 2)
        while len(nodes) < N:
            nodes += [node] * sizes[node % 3]
            node += 1
        nodes = nodes[:N]
    elif kind == "scattered":
        # a fixed pseudo-random node of 3 or so ranks each: neither blocks nor round robin
        K = max(1, int(k or 3))
        nnodes = max(1, -(-N // K))
        nodes = [((r * 7919) % (N + 1)) % nnodes for r in range(N)]
    else:
        raise ValueError(f"layout: unknown {spec!r}")
    return Layout(nodes, f"verify {spec}")


def v_counts(pattern, count, N):
    """Per-rank block counts: ``even`` (count each) or ``ragged`` (zeros and uneven sizes)."""
    if pattern == "even":
        return [count] * N
    if pattern == "ragged":
        return [(count + i) % (count + 2) for i in range(N)]
    raise ValueError(f"vcounts: unknown {pattern!r}")


def displs_of(pattern, counts, shift=0):
    """Block displacements and the buffer's length, for a pattern.

    ``packed``: rank order, back to back; ``gaps``: reverse rank order, one element before
    each block (``shift`` rotates).
    """
    N = len(counts)
    if pattern == "packed":
        off = offsets(counts)
        return off[:-1], off[-1]
    if pattern == "gaps":
        displs = [0] * N
        at = 0
        for k in range(N):
            i = (N - 1 - k + shift) % N
            at += 1
            displs[i] = at
            at += counts[i]
        return displs, at + 1
    raise ValueError(f"displs: unknown {pattern!r}")


class _Len:
    """An array of ``size`` elements while a plan is recorded."""

    __slots__ = ("size",)

    def __init__(self, size):
        self.size = size


@dataclass
class RankSetup:
    args: tuple                 # the algorithm's arguments after ctx (arrays as _Len)
    init: list                  # initial values of the call's arrays, in plan order
    expect: list                # expected final values (same order)
    roles: list                 # "in" (read only) | "out" | "inout"
    alias: dict = None          # plan buffer -> (plan buffer, start): a view of another
    calls: bool = True          # False: the API makes no call on this rank


@dataclass
class Setup:
    """One case made ready to run: its algorithm, value encoding, op, layout and ranks."""

    case: Case
    fn: object
    mode: object
    op: object
    layout: object
    ranks: list


class Symbolic:
    """What a primitive's symbolic spec (``Primitive(symbolic=...)``) is given.

    The case's numbers (``N``, ``n``: its count, ``root``, ``inplace``, and ``case``
    itself for its count and displacement patterns), its value encoding ``mode``
    (:mod:`.values`: ``inp(rank, idx)``, ``orig(n)``, ``reduction(lo, hi, idx)``,
    ``prefixes(N, idx)``), the MPI ``op`` standing for its op kind, and the
    verifier's types and helpers, so that the primitive's module needs no import
    from the verifier: ``Rank`` (:class:`RankSetup`), ``Len`` (an array's length
    while a plan is recorded), ``ar`` (``np.arange``), ``concat``, ``split``,
    ``offsets``, :meth:`v_counts`, :meth:`displs_of` and :meth:`placed`.
    """

    Rank = RankSetup
    Len = _Len
    ar = staticmethod(np.arange)
    concat = staticmethod(np.concatenate)
    split = staticmethod(split)
    offsets = staticmethod(offsets)

    def __init__(self, case, mode, op):
        self.case, self.mode, self.op = case, mode, op
        self.N, self.n, self.root, self.inplace = case.N, case.count, case.root, case.inplace

    def v_counts(self):
        """Per-rank counts of the case's pattern (:func:`v_counts`)."""
        return v_counts(self.case.vcounts, self.n, self.N)

    def placed(self, counts, displs, ext):
        """A buffer of ``ext`` whose block i (at ``displs[i]``) holds rank i's input.

        Elsewhere (the gaps) it keeps its original value: a gathered v-buffer's spec.
        """
        want = self.mode.orig(ext)
        for i, (c, d) in enumerate(zip(counts, displs, strict=True)):
            want[d:d + c] = self.mode.inp(i, self.ar(c))
        return want

    def displs_of(self, counts, shift=0, pattern=None):
        """Displacements and length for ``counts`` (:func:`displs_of`; the case's pattern)."""
        return displs_of(pattern or self.case.displs, counts, shift)


def setup(case, seed=0):
    """Every rank's arguments, initial and expected values for ``case``.

    The expected values are the primitive's own spec (its ``symbolic``, declared with the
    primitive in ``mpicoll/calls/``).
    """
    p, N = case.primitive, case.N
    fn = lookup(p, case.algorithm)
    opk = case.op if p in REDUCING else None
    mode = mode_for(N, opk, seed)
    op = op_object(opk) if opk else None
    lay = layout_of(case.layout, N)
    primitive = DEFINED.get(p)
    spec = getattr(primitive, "symbolic", None)
    if spec is None:
        raise ValueError(f"primitive: {p!r} declares no symbolic spec (Primitive(symbolic=...))")
    ranks = spec(Symbolic(case, mode, op))
    return Setup(case, fn, mode, op, lay, ranks)
