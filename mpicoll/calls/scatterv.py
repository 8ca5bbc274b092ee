"""scatterv: block i, of any size, of the root's v-buffer into rank i's buffer (``MPI_Scatterv``).

The v side of a call is an mpi4py v-buffer spec (its forms: :mod:`mpicoll.args.vbuffers`;
the rules every v primitive shares: :mod:`mpicoll.calls`).
"""
from mpi4py import MPI

from ..args.buffers import (
    check_no_alias,
    is_in_place,
    not_in_place,
    same_dtype,
    same_memory,
)
from ..args.bufspec import is_rank, parse_bufspec, parse_vec, required
from ..core.errors import ArgumentError
from ..core.rules import Auto, Rule
from ..sched.inspect import Len
from ._common import recv_block, rooted
from ._vcommon import check_counts_match, launch, v_counts, v_side, v_whole
from .primitive import Primitive, define
from .scatter import ScatterSpec
from .spec import VCounts


def scatterv(sendbuf, recvbuf, root=0):
    """Send block i of ``sendbuf`` on ``root`` into ``recvbuf`` on rank i; return recvbuf.

    ``sendbuf`` (root only): a v-buffer spec (send blocks may overlap).
    Every rank's ``recvbuf`` size is its count. ``recvbuf=MPI.IN_PLACE`` on
    the root leaves its block in sendbuf (and returns None there).
    Per rank, N = 3, counts [1, 0, 2]: root's ``[1 3 3]`` -> ``[1]``, ``[]``, ``[3 3]``.
    """
    return (sendbuf, recvbuf), (root,)


def run(call, bufs, root, algorithm):
    """The scatterv implementation (every face): validate, agree, launch; the output."""
    mine = -1
    with call.checking():
        root, is_root, sendbuf, recvbuf = rooted(call, bufs, root)
        sflat = scounts = sdispls = None
        if is_root:
            sv, sflat, scounts, sdispls = v_side("sendbuf", sendbuf, call.size, receive=False)
            if sv is None or sv is MPI.IN_PLACE:
                raise ArgumentError(
                    f"sendbuf: expected the root's send buffer (a v-buffer spec); got "
                    f"{'None' if sv is None else 'MPI.IN_PLACE'}", MPI.ERR_BUFFER)
        if is_in_place(recvbuf):
            if not is_root:
                raise not_in_place("recvbuf", "on the root")
            out = dest = None
            mine = scounts[root]
        else:
            out, dest = recv_block(recvbuf, "every rank needs one; it sets this rank's count")
            if is_root:
                same_memory("recvbuf", dest, "sendbuf", sflat)
                same_dtype("recvbuf", dest, "sendbuf", sflat)
                check_no_alias("sendbuf", sflat, "recvbuf", dest)
            mine = dest.size
    counts = call.exchange(mine)

    def settled():
        if is_root:
            check_counts_match("sendbuf counts", scounts, counts, "receives")
        return out, sflat, dest, sdispls
    return launch(call, algorithm, counts, settled, root)


def Scatterv(comm, call, bnd, algorithm, sendbuf, recvbuf, root=0):
    """mpi4py's ``Scatterv``: its buffer forms parsed, then :func:`run`."""
    def bufs():
        root_here = is_rank(root, comm.Get_rank())
        s = parse_vec("sendbuf", required("sendbuf", sendbuf), bnd, "send",
                      comm.Get_size()) if root_here else None
        r = parse_bufspec("recvbuf", recvbuf, bnd=bnd, role="recv")
        if r is MPI.IN_PLACE and not root_here:
            r = None                # reported as a missing buffer, as Scatter does
        return s, r
    run(call, bufs, root, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """``count``: elements of each rank's block; ``counts``: per-rank blocks instead."""
    cs = v_counts(size, count, counts)
    whole, at = v_whole(cs, rank == root)
    return (whole, Len(cs[rank]), cs, at, root)


class ScattervSpec(VCounts, ScatterSpec):
    """The bench and test spec of scatterv."""

    raw = "comm.Scatterv([sendbuf, counts], recvbuf, root)"
    native_coll = "scatterv"

    def args(self, c):
        """The arguments: ``([send, counts] on the root, recv, root)``."""
        return ([c.send, c.vcounts] if c.rank == c.root else None, c.recv, c.root)

    def raw_call(self, c, comm):
        """``comm.Scatterv([sendbuf, counts], recvbuf, root)``."""
        send = [c.send, c.vcounts] if c.rank == c.root else None
        return lambda: comm.Scatterv(send, c.recv, c.root)


def symbolic(k):
    """The verifier's spec: rank r's recvbuf ends as block r of the root's sendbuf."""
    counts = k.v_counts()
    total = sum(counts)
    N, root = k.N, k.root
    ranks = []
    for r in range(N):
        mine = counts[r]
        displs, ext = k.displs_of(counts)       # the root's displacements decide what r gets
        if r == root:
            src = k.mode.inp(root, k.ar(ext))
            if k.inplace:
                ranks.append(k.Rank((k.Len(ext), None, counts, displs, root), [src], [src],
                                    ["in"], calls=bool(total)))
            else:
                got = src[displs[r]:displs[r] + mine]
                ranks.append(k.Rank((k.Len(ext), k.Len(mine), counts, displs, root),
                                    [src, k.mode.orig(mine)], [src, got], ["in", "out"],
                                    calls=bool(total)))
        else:
            got = k.mode.inp(root, k.ar(displs[r], displs[r] + mine))
            ranks.append(k.Rank((None, k.Len(mine), counts, None, root), [k.mode.orig(mine)],
                                [got], ["out"], calls=bool(total)))
    return ranks


def soak(k):
    """The soak's case: as ``comm.Scatterv``; the root's sendbuf kept, in place None returned."""
    counts, displs, n = k.v_layout()
    root, here, mine = k.root, k.is_root, counts[k.rank]
    full = k.kept(k.data([root, 19], n), "scatterv modified the root's sendbuf")
    want = k.empty(mine)
    k.comm.Scatterv([full, (counts, displs)] if here else None, want, root)
    if k.in_place and here:
        if k.api.scatterv([full, (counts, displs)], MPI.IN_PLACE, root, **k.kw) is not None:
            return "scatterv in place returned a value on the root"
        got = full[displs[root]:displs[root] + counts[root]].copy()
    else:
        got = k.api.scatterv([full, (counts, displs)] if here else None, k.empty(mine), root,
                             **k.kw)
    return got, want


#: auto's rule.
AUTO = Auto(Rule("binomial"))

PRIMITIVE = define(Primitive("scatterv", run=run, api=(scatterv,), methods=(Scatterv,),
                             in_place=True,
                             call_arrays=call_arrays, spec=ScattervSpec(), vspecs=True,
                             auto=AUTO, symbolic=symbolic, soak=soak))
