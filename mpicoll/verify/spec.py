"""Cases and specifications: the arguments of one call on every rank, and what it must leave.

A :class:`Case` names one call of one algorithm: N, count, root, op kind,
item size, in place or not, the v-counts and displacement patterns, and the
node layout of a node-aware algorithm. :func:`setup` turns it into what the
executor needs for every rank: the arguments the algorithm is recorded with
(arrays as lengths, exactly as :mod:`mpicoll.collectives` and
:mod:`mpicoll.vcollectives` pass them), the initial symbolic value of each
call buffer, and its expected final value -- the primitive's specification:

=================  ==========================================================
bcast              every rank's buffer = the root's input
reduce             the root's recvbuf = all ranks reduced (rank order)
allreduce          every recvbuf = all ranks reduced
gather(v)          block i of the root's recvbuf = rank i's input; gaps kept
allgather(v)       block i of every recvbuf = rank i's input; gaps kept
scatter(v)         rank r's recvbuf = block r of the root's sendbuf
reduce_scatter     rank r's recvbuf = block r of all ranks reduced
alltoall(v)        block i of rank r's recvbuf = block r of rank i's sendbuf
scan / exscan      rank r = ranks 0..r (0..r-1) reduced; exscan's rank 0 kept
barrier            every rank's exit follows every rank's entry (executor)
=================  ==========================================================

Buffers that are only read (a sendbuf, the root's bcast buffer) have their
initial value as the expected one, so a write that changes them fails as an
overwrite of a final element.
"""
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from mpi4py import MPI

from ._mpicoll import Layout, lookup, offsets, split
from .values import mode_for

__all__ = ["Case", "Setup", "setup", "REDUCING", "ROOTED", "V_PRIMITIVES", "op_object",
           "layout_of", "v_counts", "displs_of"]

#: Primitives whose algorithms take an op.
REDUCING = ("reduce", "allreduce", "reduce_scatter", "scan", "exscan")
#: Primitives with a root.
ROOTED = ("bcast", "reduce", "gather", "scatter", "gatherv", "scatterv")
#: Primitives whose count is a per-rank count pattern.
V_PRIMITIVES = ("gatherv", "scatterv", "allgatherv", "alltoallv")
#: In-place forms the API hands to the algorithms as such (the others get a copy).
IN_PLACE = ("allreduce", "gather", "allgather", "gatherv", "scatterv", "allgatherv", "scan",
            "exscan")

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
        if self.primitive in V_PRIMITIVES or self.primitive == "reduce_scatter":
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


def setup(case, seed=0):
    """Every rank's arguments, initial and expected values for ``case``."""
    p, N, n, root = case.primitive, case.N, case.count, case.root
    fn = lookup(p, case.algorithm)
    opk = case.op if p in REDUCING else None
    mode = mode_for(N, opk, seed)
    op = op_object(opk) if opk else None
    lay = layout_of(case.layout, N)
    ar = np.arange
    ranks = []
    A = _Len
    ip = case.inplace
    if p == "bcast":
        want = mode.inp(root, ar(n))
        for r in range(N):
            if r == root:
                ranks.append(RankSetup((A(n), root), [want], [want], ["in"]))
            else:
                ranks.append(RankSetup((A(n), root), [mode.orig(n)], [want], ["out"]))
    elif p == "reduce":
        full = mode.reduction(0, N, ar(n))
        for r in range(N):
            x = mode.inp(r, ar(n))
            if r == root:
                ranks.append(RankSetup((A(n), A(n), op, root), [x, mode.orig(n)], [x, full],
                                       ["in", "out"]))
            else:
                ranks.append(RankSetup((A(n), None, op, root), [x], [x], ["in"]))
    elif p == "allreduce":
        full = mode.reduction(0, N, ar(n))
        for r in range(N):
            x = mode.inp(r, ar(n))
            if ip:
                ranks.append(RankSetup((None, A(n), op), [x], [full], ["inout"]))
            else:
                ranks.append(RankSetup((A(n), A(n), op), [x, mode.orig(n)], [x, full],
                                       ["in", "out"]))
    elif p in ("gather", "allgather"):
        c = n
        blocks = np.concatenate([mode.inp(i, ar(c)) for i in range(N)]) if c else mode.orig(0)
        for r in range(N):
            x = mode.inp(r, ar(c))
            has = p == "allgather" or r == root
            args = (A(c), A(N * c) if has else None) + ((root,) if p == "gather" else ())
            if not has:
                ranks.append(RankSetup(args, [x], [x], ["in"]))
                continue
            recv = mode.orig(N * c)
            if ip:
                recv[r * c:(r + 1) * c] = x
                ranks.append(RankSetup(args, [recv[r * c:(r + 1) * c], recv], [None, blocks],
                                       ["in", "out"], alias={0: (1, r * c)}))
            else:
                ranks.append(RankSetup(args, [x, recv], [x, blocks], ["in", "out"]))
    elif p == "scatter":
        c = n
        src = mode.inp(root, ar(N * c))
        for r in range(N):
            mine = src[r * c:(r + 1) * c]
            if r == root:
                ranks.append(RankSetup((A(N * c), A(c), root), [src, mode.orig(c)], [src, mine],
                                       ["in", "out"]))
            else:
                ranks.append(RankSetup((None, A(c), root), [mode.orig(c)], [mine], ["out"]))
    elif p == "reduce_scatter":
        counts = split(n, N) if case.vcounts == "even" else v_counts(case.vcounts, n, N)
        total = sum(counts)
        off = offsets(counts)
        full = mode.reduction(0, N, ar(total))
        for r in range(N):
            x = mode.inp(r, ar(total))
            ranks.append(RankSetup((A(total), A(counts[r]), list(counts), op),
                                   [x, mode.orig(counts[r])], [x, full[off[r]:off[r + 1]]],
                                   ["in", "out"]))
    elif p == "alltoall":
        c = n
        for r in range(N):
            x = mode.inp(r, ar(N * c))
            want = np.concatenate([mode.inp(i, ar(r * c, (r + 1) * c)) for i in range(N)]) \
                if c else mode.orig(0)
            ranks.append(RankSetup((A(N * c), A(N * c)), [x, mode.orig(N * c)], [x, want],
                                   ["in", "out"]))
    elif p == "barrier":
        ranks = [RankSetup((), [], [], []) for _ in range(N)]
    elif p in ("scan", "exscan"):
        pre = list(mode.prefixes(N, ar(n)))
        for r in range(N):
            x = mode.inp(r, ar(n))
            if p == "scan":
                want = pre[r]
            else:
                want = None if r == 0 else pre[r - 1]
            if ip:
                ranks.append(RankSetup((None, A(n), op), [x], [x if want is None else want],
                                       ["inout"]))
            else:
                o = mode.orig(n)
                ranks.append(RankSetup((A(n), A(n), op), [x, o], [x, o if want is None else want],
                                       ["in", "out"]))
    elif p in ("gatherv", "scatterv", "allgatherv"):
        counts = v_counts(case.vcounts, n, N)
        total = sum(counts)
        for r in range(N):
            mine = counts[r]
            x = mode.inp(r, ar(mine))
            if p == "gatherv":
                if r != root:
                    ranks.append(RankSetup((A(mine), None, counts, None, root), [x], [x], ["in"],
                                           calls=bool(total)))
                    continue
                displs, ext = displs_of(case.displs, counts)
                recv, want = mode.orig(ext), mode.orig(ext)
                for i in range(N):
                    want[displs[i]:displs[i] + counts[i]] = mode.inp(i, ar(counts[i]))
                if ip:
                    recv[displs[r]:displs[r] + mine] = x
                    ranks.append(RankSetup((None, A(ext), counts, displs, root), [recv], [want],
                                           ["out"], calls=bool(total)))
                else:
                    ranks.append(RankSetup((A(mine), A(ext), counts, displs, root), [x, recv],
                                           [x, want], ["in", "out"], calls=bool(total)))
            elif p == "scatterv":
                if r == root:
                    displs, ext = displs_of(case.displs, counts)
                    src = mode.inp(root, ar(ext))
                    if ip:
                        ranks.append(RankSetup((A(ext), None, counts, displs, root), [src], [src],
                                               ["in"], calls=bool(total)))
                    else:
                        got = src[displs[r]:displs[r] + mine]
                        ranks.append(RankSetup((A(ext), A(mine), counts, displs, root),
                                               [src, mode.orig(mine)], [src, got], ["in", "out"],
                                               calls=bool(total)))
                else:
                    # the root's displacements decide what rank r gets
                    displs, ext = displs_of(case.displs, counts)
                    got = mode.inp(root, ar(displs[r], displs[r] + mine))
                    ranks.append(RankSetup((None, A(mine), counts, None, root), [mode.orig(mine)],
                                           [got], ["out"], calls=bool(total)))
            else:       # allgatherv: each rank its own displacements (odd ranks: rotated gaps)
                pat = (case.displs if r % 2 == 0
                       else ("gaps" if case.displs == "gaps" else "packed"))
                displs, ext = displs_of(pat, counts, shift=r if pat == "gaps" else 0)
                recv, want = mode.orig(ext), mode.orig(ext)
                for i in range(N):
                    want[displs[i]:displs[i] + counts[i]] = mode.inp(i, ar(counts[i]))
                if ip:
                    recv[displs[r]:displs[r] + mine] = x
                    ranks.append(RankSetup((None, A(ext), counts, displs), [recv], [want],
                                           ["out"], calls=bool(total)))
                else:
                    ranks.append(RankSetup((A(mine), A(ext), counts, displs), [x, recv],
                                           [x, want], ["in", "out"], calls=bool(total)))
    elif p == "alltoallv":
        if case.vcounts == "even":
            S = [[n] * N for _ in range(N)]
        else:
            S = [[(n + i + 2 * j) % (n + 2) for j in range(N)] for i in range(N)]
        sd = []
        for i in range(N):
            d, ext = displs_of(case.displs, S[i], shift=i)
            sd.append((d, ext))
        for r in range(N):
            scounts = S[r]
            rcounts = [S[i][r] for i in range(N)]
            sdispls, sext = sd[r]
            rdispls, rext = displs_of(case.displs, rcounts, shift=N - 1 - r)
            x = mode.inp(r, ar(sext))
            want = mode.orig(rext)
            for i in range(N):
                a = sd[i][0][r]
                want[rdispls[i]:rdispls[i] + rcounts[i]] = mode.inp(i, ar(a, a + rcounts[i]))
            calls = bool(sum(scounts) + sum(rcounts))
            ranks.append(RankSetup((A(sext), A(rext), scounts, sdispls, rcounts, rdispls),
                                   [x, mode.orig(rext)], [x, want], ["in", "out"], calls=calls))
    else:
        raise ValueError(f"primitive: unknown {p!r}")
    return Setup(case, fn, mode, op, lay, ranks)
