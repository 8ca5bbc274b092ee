"""allgatherv: every rank's block, of any size, into every rank's v-buffer (``MPI_Allgatherv``).

The v side of a call is an mpi4py v-buffer spec (its forms: :mod:`mpicoll.args.vbuffers`;
the rules every v primitive shares: :mod:`mpicoll.calls`).
"""
from mpi4py import MPI

from ..args.bufspec import parse_bufspec, parse_vec, required, role
from ..core.errors import ArgumentError
from ..core.rules import Auto, KiB, N, Rule, n
from ..sched.inspect import Len
from ._vcommon import gathered, gathered_send, launch, v_counts, v_side, v_whole
from .allgather import AllgatherSpec
from .primitive import Primitive, define
from .spec import VCounts


def allgatherv(sendbuf, recvbuf=None):
    """Gather every rank's ``sendbuf`` (any size) into ``recvbuf`` on every rank.

    ``recvbuf``: a v-buffer spec (each rank's own displacements), or None
    to allocate a 1-D array with the blocks back to back in rank order.
    ``sendbuf=MPI.IN_PLACE``: this rank's block is already in recvbuf.
    Per rank, N = 3: ``[1]``, ``[]``, ``[3 3]`` -> ``[1 3 3]`` everywhere.
    """
    return (sendbuf, recvbuf), ()


def run(call, bufs, algorithm):
    """The allgatherv implementation (every face): validate, agree, launch; the output."""
    mine = -1
    with call.checking():
        rank = call.rank
        sendbuf, recvbuf = bufs()
        rv, rflat, rcounts, rdispls = v_side("recvbuf", recvbuf, call.size, receive=True)
        if rv is MPI.IN_PLACE:
            raise ArgumentError("recvbuf: expected a receive buffer; got MPI.IN_PLACE",
                                MPI.ERR_BUFFER)
        data, mine = gathered_send(sendbuf, rv, rflat, rcounts, rank, "this rank's")
    counts = call.exchange(mine)
    return launch(call, algorithm, counts,
                  lambda: gathered(data, rv, rflat, rcounts, rdispls, counts))


def Allgatherv(comm, call, bnd, algorithm, sendbuf, recvbuf):
    """mpi4py's ``Allgatherv``: its buffer forms parsed, then :func:`run`."""
    def bufs():
        s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
        return s, parse_vec("recvbuf", required("recvbuf", recvbuf), bnd, role(s),
                            comm.Get_size())
    run(call, bufs, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """``count``: elements of each rank's block; ``counts``: per-rank blocks instead."""
    cs = v_counts(size, count, counts)
    whole, at = v_whole(cs, True)
    return (Len(cs[rank]), whole, cs, at)


class AllgathervSpec(VCounts, AllgatherSpec):
    """The bench and test spec of allgatherv."""

    raw = "comm.Allgatherv(sendbuf, [recvbuf, counts])"
    native_coll = "allgatherv"

    def args(self, c):
        """The arguments: ``(send, [recv, counts])``."""
        return (c.send, [c.recv, c.vcounts])

    def raw_call(self, c, comm):
        """``comm.Allgatherv(sendbuf, [recvbuf, counts])``."""
        recv = [c.recv, c.vcounts]
        return lambda: comm.Allgatherv(c.send, recv)


def symbolic(k):
    """The verifier's spec: block i of every recvbuf ends as rank i's input; gaps kept.

    Each rank has its own displacements (odd ranks' gaps rotated).
    """
    counts = k.v_counts()
    total = sum(counts)
    N = k.N
    ranks = []
    for r in range(N):
        mine = counts[r]
        x = k.mode.inp(r, k.ar(mine))
        pat = (k.case.displs if r % 2 == 0
               else ("gaps" if k.case.displs == "gaps" else "packed"))
        displs, ext = k.displs_of(counts, shift=r if pat == "gaps" else 0, pattern=pat)
        recv = k.mode.orig(ext)
        want = k.placed(counts, displs, ext)
        if k.inplace:
            recv[displs[r]:displs[r] + mine] = x
            ranks.append(k.Rank((None, k.Len(ext), counts, displs), [recv], [want], ["out"],
                                calls=bool(total)))
        else:
            ranks.append(k.Rank((k.Len(mine), k.Len(ext), counts, displs), [x, recv],
                                [x, want], ["in", "out"], calls=bool(total)))
    return ranks


def soak(k):
    """The soak's case: as ``comm.Allgatherv``, random counts and gaps."""
    counts, displs, n = k.v_layout()
    block = k.v_block(counts)
    want = k.zeros(n)
    k.comm.Allgatherv(block, [want, (counts, displs)])
    got = k.v_placed(n, counts, displs, k.rank, block) if k.in_place else k.zeros(n)
    k.api.allgatherv(MPI.IN_PLACE if k.in_place else block, [got, (counts, displs)], **k.kw)
    return got, want


#: auto's rule. Bruck: ⌈log2 N⌉ messages, whatever the counts. The ring moves each byte once,
#: without a temporary: long messages. Its steps last as long as the largest block, so very
#: uneven counts favour Bruck longer than this rule (it sees only the mean block) says.
AUTO = Auto(Rule("bruck", N * n < 80 * KiB), Rule("ring"), note="n: the mean block")

PRIMITIVE = define(Primitive("allgatherv", run=run, api=(allgatherv,), methods=(Allgatherv,),
                             in_place=True,
                             call_arrays=call_arrays, spec=AllgathervSpec(), vspecs=True,
                             auto=AUTO, symbolic=symbolic, soak=soak))
