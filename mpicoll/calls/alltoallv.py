"""alltoallv: block j, of any size, of every rank's v-buffer to rank j (``MPI_Alltoallv``).

The v side of a call is an mpi4py v-buffer spec (its forms: :mod:`mpicoll.args.vbuffers`;
the rules every v primitive shares: :mod:`mpicoll.calls`).

Each rank's counts are its own, so the ranks agree on a checksum of them
(:func:`pair_checksum`) rather than on the counts themselves.
"""
from mpi4py import MPI

from ..args.buffers import check_no_alias, is_in_place, same_dtype, same_memory, snapshot
from ..args.bufspec import parse_vec, required, role
from ..core.blocks import offsets
from ..core.errors import ArgumentError
from ..core.rules import Auto, N, Rule
from ..engine.launch import run_call
from ..sched.inspect import Len
from ._vcommon import v_counts, v_side
from .alltoall import AlltoallSpec
from .primitive import Primitive, define
from .spec import VCounts


def alltoallv(sendbuf, recvbuf):
    """Send block j of ``sendbuf`` to rank j; block i of ``recvbuf`` comes from rank i.

    Both are v-buffer specs: rank i's ``sendcounts[j]`` must equal rank j's
    ``recvcounts[i]`` (checked on every rank). ``sendbuf=MPI.IN_PLACE``:
    recvbuf's blocks are sent and replaced. Returns recvbuf's buffer.
    Per rank, N = 2: ``[[a0 b0 b0], [1, 2]]``, ``[[c1], [0, 1]]`` ->
    ``[a0]``, ``[b0 b0 c1]`` (with recvcounts ``[1, 0]`` and ``[2, 1]``).
    """
    return (sendbuf, recvbuf), ()


_P = (1 << 61) - 1      # a Mersenne prime: checksums of counts live modulo it


def _mix(x):
    """splitmix64's finaliser: a well-spread 64-bit value for each (rank, peer) pair."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (x ^ (x >> 31)) % _P


def pair_checksum(rank, size, sendcounts, recvcounts):
    """Σ_j w(rank, j)·sendcounts[j] - Σ_i w(i, rank)·recvcounts[i] (mod P).

    Summed over all ranks it is 0 when every rank i's sendcounts[j] equals
    rank j's recvcounts[i]; any mismatch leaves it non-zero but for a
    chance of about 2^-61.
    """
    s = sum(_mix(rank * size + j) * c for j, c in enumerate(sendcounts))
    r = sum(_mix(i * size + rank) * c for i, c in enumerate(recvcounts))
    return (s - r) % _P


def run(call, bufs, algorithm):
    """The alltoallv implementation (every face): validate, agree, launch; the output."""
    mine = 0
    with call.checking():
        size, rank = call.size, call.rank
        sendbuf, recvbuf = bufs()
        rv, rflat, rcounts, rdispls = v_side("recvbuf", recvbuf, size, receive=True)
        if rv is None or rv is MPI.IN_PLACE:
            raise ArgumentError(
                f"recvbuf: expected a v-buffer spec (alltoallv cannot allocate: the receive "
                f"counts are the caller's); got {'None' if rv is None else 'MPI.IN_PLACE'}",
                MPI.ERR_BUFFER)
        in_place = is_in_place(sendbuf)
        if in_place:                    # sent from a snapshot of recvbuf, with its layout
            sflat, scounts, sdispls = rflat, rcounts, rdispls
        else:
            sv, sflat, scounts, sdispls = v_side("sendbuf", sendbuf, size, receive=False)
            if sv is None:
                raise ArgumentError("sendbuf: expected a v-buffer spec or MPI.IN_PLACE; got None",
                                    MPI.ERR_BUFFER)
            same_memory("sendbuf", sflat, "recvbuf", rflat)
            same_dtype("sendbuf", sflat, "recvbuf", rflat)
            check_no_alias("sendbuf", sflat, "recvbuf", rflat)
            if scounts[rank] != rcounts[rank]:
                raise ArgumentError(
                    f"sendbuf counts[{rank}] = {scounts[rank]} but recvbuf counts[{rank}] = "
                    f"{rcounts[rank]}: this rank's block to itself must match", MPI.ERR_COUNT)
        mine = pair_checksum(rank, size, scounts, rcounts)
    sums = call.exchange(mine)
    with call.checking():
        if sum(sums) % _P:
            raise ArgumentError(
                "sendbuf/recvbuf counts: do not match between ranks (rank i's sendcounts[j] "
                "must equal rank j's recvcounts[i]); nothing was sent", MPI.ERR_COUNT)
        # Each rank's counts are its own: nothing about them is equal on every rank,
        # so auto looks at N only and checked mode has no count to compare.
        fn = call.choose(algorithm, nbytes=0, count=0, dtype=rflat.dtype, like=(sflat, rflat))
    call.settle()
    pro = None
    if in_place:
        sflat, pro = snapshot(rflat)
    run_call(call, sum(scounts) + sum(rcounts), rflat.itemsize, fn, sflat, rflat, scounts, sdispls,
         rcounts, rdispls, prologue=pro, local=True)
    return rv.obj


def Alltoallv(comm, call, bnd, algorithm, sendbuf, recvbuf):
    """mpi4py's ``Alltoallv``: its buffer forms parsed, then :func:`run`."""
    def bufs():
        # None means MPI.IN_PLACE, as in parse_bufspec
        size = comm.Get_size()
        s = MPI.IN_PLACE if sendbuf is None else parse_vec("sendbuf", sendbuf, bnd, "send", size)
        return s, parse_vec("recvbuf", required("recvbuf", recvbuf), bnd, role(s), size)
    run(call, bufs, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """The algorithm arguments of an alltoallv call on ``rank`` (arrays as ``Len``).

    ``counts[j]``: what every rank sends to rank j (so rank i receives ``counts[i]`` from
    each), default ``count`` everywhere.
    """
    cs = v_counts(size, count, counts)
    rc = [cs[rank]] * size
    return (Len(sum(cs)), Len(sum(rc)), cs, offsets(cs)[:-1], rc, offsets(rc)[:-1])


class AlltoallvSpec(VCounts, AlltoallSpec):
    """The bench and test spec of alltoallv."""

    raw = "comm.Alltoallv([sendbuf, counts], [recvbuf, counts])"
    native_coll = "alltoallv"
    torch_fn = "all_to_all_single"

    def args(self, c):
        """The arguments: ``([send, counts], [recv, counts])``."""
        return ([c.send, c.vcounts], [c.recv, c.vcounts])

    def raw_call(self, c, comm):
        """``comm.Alltoallv([sendbuf, counts], [recvbuf, counts])``."""
        send, recv = [c.send, c.vcounts], [c.recv, c.vcounts]
        return lambda: comm.Alltoallv(send, recv)

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.all_to_all_single(output, input, counts, counts)``."""
        counts = list(c.vcounts)
        return lambda: fn(recv, send, counts, counts, group=group)


def symbolic(k):
    """The verifier's spec: block i of rank r's recvbuf ends as block r of rank i's sendbuf.

    Ragged counts: rank i sends (n + i + 2j) mod (n + 2) elements to rank j.
    """
    n, N = k.n, k.N
    if k.case.vcounts == "even":
        S = [[n] * N for _ in range(N)]
    else:
        S = [[(n + i + 2 * j) % (n + 2) for j in range(N)] for i in range(N)]
    sd = [k.displs_of(S[i], shift=i) for i in range(N)]
    ranks = []
    for r in range(N):
        scounts = S[r]
        rcounts = [S[i][r] for i in range(N)]
        sdispls, sext = sd[r]
        rdispls, rext = k.displs_of(rcounts, shift=N - 1 - r)
        x = k.mode.inp(r, k.ar(sext))
        want = k.mode.orig(rext)
        for i in range(N):
            a = sd[i][0][r]
            want[rdispls[i]:rdispls[i] + rcounts[i]] = k.mode.inp(i, k.ar(a, a + rcounts[i]))
        calls = bool(sum(scounts) + sum(rcounts))
        ranks.append(k.Rank((k.Len(sext), k.Len(rext), scounts, sdispls, rcounts, rdispls),
                            [x, k.mode.orig(rext)], [x, want], ["in", "out"], calls=calls))
    return ranks


def soak(k):
    """The soak's case: as ``comm.Alltoallv``; sendbuf kept.

    ``counts[(i + j) % N]`` from rank i to rank j: symmetric, so in place works too.
    """
    counts = k.v_layout()[0]
    sc = [counts[(k.rank + j) % k.size] for j in range(k.size)]
    sd = offsets(sc)[:-1]
    send = k.kept(k.data([k.rank, 23], sum(sc)), "alltoallv modified sendbuf")
    want = k.zeros(sum(sc))
    k.comm.Alltoallv([send, (sc, sd)], [want, (sc, sd)])
    if k.in_place:
        got = k.api.alltoallv(MPI.IN_PLACE, [send.copy(), (sc, sd)], **k.kw)
    else:
        got = k.api.alltoallv([send, (sc, sd)], [k.zeros(sum(sc)), (sc, sd)], **k.kw)
    return got, want


#: auto's rule: its counts are each rank's own, so it looks at N only (every rank must choose
#: the same). MPICH posts everything at once (in batches of 32 peers): linear up to that
#: many, then one peer per step so no rank floods the network.
AUTO = Auto(Rule("linear", N <= 32), Rule("pairwise"))

PRIMITIVE = define(Primitive("alltoallv", run=run, api=(alltoallv,), methods=(Alltoallv,),
                             call_arrays=call_arrays, spec=AlltoallvSpec(), vspecs=True,
                             auto=AUTO, symbolic=symbolic, soak=soak))
