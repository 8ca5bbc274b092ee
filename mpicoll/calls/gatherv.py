"""gatherv: every rank's block, of any size, into the root's v-buffer (``MPI_Gatherv``).

The v side of a call is an mpi4py v-buffer spec (its forms: :mod:`mpicoll.args.vbuffers`;
the rules every v primitive shares: :mod:`mpicoll.calls`).
"""
from mpi4py import MPI

from ..args.buffers import is_in_place, not_in_place
from ..args.bufspec import is_rank, parse_bufspec, parse_vec, required, role
from ..core.errors import ArgumentError
from ..core.rules import Auto, Rule
from ..sched.inspect import Len
from ._common import rooted
from ._vcommon import gathered, gathered_send, launch, v_counts, v_side, v_whole
from .gather import GatherSpec
from .primitive import Primitive, define
from .spec import VCounts


def gatherv(sendbuf, recvbuf=None, root=0):
    """Gather every rank's ``sendbuf`` (any size, zero included) into ``recvbuf`` on ``root``.

    ``recvbuf`` (root only): a v-buffer spec; block i (``counts[i]``
    elements at ``displs[i]``) receives rank i's sendbuf; None allocates a
    1-D array with the blocks back to back in rank order. Returns the
    receive buffer on the root, None elsewhere. ``sendbuf=MPI.IN_PLACE`` on
    the root: its block is already in place.
    Per rank, N = 3: ``[1]``, ``[]``, ``[3 3]`` -> root gets ``[1 3 3]``.
    """
    return (sendbuf, recvbuf), (root,)


def run(call, bufs, root, algorithm):
    """The gatherv implementation (every face): validate, agree, launch; the output on the root."""
    mine = -1
    with call.checking():
        root, is_root, sendbuf, recvbuf = rooted(call, bufs, root)
        rv = rflat = rcounts = rdispls = None
        if is_root:
            rv, rflat, rcounts, rdispls = v_side("recvbuf", recvbuf, call.size, receive=True)
            if rv is MPI.IN_PLACE:
                raise ArgumentError(
                    "recvbuf: expected the root's receive buffer; got MPI.IN_PLACE",
                    MPI.ERR_BUFFER)
        if is_in_place(sendbuf) and not is_root:
            raise not_in_place("sendbuf", "on the root")
        data, mine = gathered_send(sendbuf, rv, rflat, rcounts, root, "the root's")
    counts = call.exchange(mine)        # every rank's count, on every rank

    def settled():
        if not is_root:
            return None, data, None, None
        return gathered(data, rv, rflat, rcounts, rdispls, counts)
    return launch(call, algorithm, counts, settled, root)


def Gatherv(comm, call, bnd, algorithm, sendbuf, recvbuf, root=0):
    """mpi4py's ``Gatherv``: its buffer forms parsed, then :func:`run`."""
    def bufs():
        s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
        r = None
        if is_rank(root, comm.Get_rank()):
            r = parse_vec("recvbuf", required("recvbuf", recvbuf), bnd, role(s), comm.Get_size())
        return s, r
    run(call, bufs, root, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """``count``: elements of each rank's block; ``counts``: per-rank blocks instead."""
    cs = v_counts(size, count, counts)
    whole, at = v_whole(cs, rank == root)
    return (Len(cs[rank]), whole, cs, at, root)


class GathervSpec(VCounts, GatherSpec):
    """The bench and test spec of gatherv."""

    raw = "comm.Gatherv(sendbuf, [recvbuf, counts], root)"
    native_coll = "gatherv"

    def args(self, c):
        """The arguments: ``(send, [recv, counts] on the root, root)``."""
        return (c.send, [c.recv, c.vcounts] if c.rank == c.root else None, c.root)

    def raw_call(self, c, comm):
        """``comm.Gatherv(sendbuf, [recvbuf, counts], root)``."""
        recv = [c.recv, c.vcounts] if c.rank == c.root else None
        return lambda: comm.Gatherv(c.send, recv, c.root)


def symbolic(k):
    """The verifier's spec: block i of the root's recvbuf ends as rank i's input; gaps kept."""
    counts = k.v_counts()
    total = sum(counts)
    N, root = k.N, k.root
    ranks = []
    for r in range(N):
        mine = counts[r]
        x = k.mode.inp(r, k.ar(mine))
        if r != root:
            ranks.append(k.Rank((k.Len(mine), None, counts, None, root), [x], [x], ["in"],
                                calls=bool(total)))
            continue
        displs, ext = k.displs_of(counts)
        recv = k.mode.orig(ext)
        want = k.placed(counts, displs, ext)
        if k.inplace:
            recv[displs[r]:displs[r] + mine] = x
            ranks.append(k.Rank((None, k.Len(ext), counts, displs, root), [recv], [want],
                                ["out"], calls=bool(total)))
        else:
            ranks.append(k.Rank((k.Len(mine), k.Len(ext), counts, displs, root), [x, recv],
                                [x, want], ["in", "out"], calls=bool(total)))
    return ranks


def soak(k):
    """The soak's case: as ``comm.Gatherv``; the root's recvbuf returned, None elsewhere."""
    counts, displs, n = k.v_layout()
    block = k.v_block(counts)
    root, here = k.root, k.is_root
    want = k.zeros(n) if here else None
    k.comm.Gatherv(block, [want, (counts, displs)] if here else None, root)
    inpl = k.in_place and here
    got = (k.v_placed(n, counts, displs, root, block) if inpl else k.zeros(n)) if here else None
    res = k.api.gatherv(MPI.IN_PLACE if inpl else block,
                        [got, (counts, displs)] if here else None, root, **k.kw)
    if res is not got:
        return "gatherv returned something else than recvbuf (root) or None"
    return (got, want) if here else k.nothing()


#: auto's rule.
AUTO = Auto(Rule("binomial"))

PRIMITIVE = define(Primitive("gatherv", run=run, api=(gatherv,), methods=(Gatherv,),
                             in_place=True,
                             call_arrays=call_arrays, spec=GathervSpec(), vspecs=True,
                             auto=AUTO, symbolic=symbolic, soak=soak))
