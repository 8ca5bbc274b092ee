"""alltoall: block j of every rank's buffer to rank j (``MPI_Alltoall``)."""
import numpy as np

from ..args.buffers import is_in_place, whole_blocks
from ..args.bufspec import parse_bufspec, recv_spec
from ..core.rules import Auto, N, Rule, n
from ..engine.launch import run_call
from ..sched.inspect import Len
from ._common import recv_as_send, recv_out, snapshot_if
from .primitive import Primitive, define
from .spec import Spec, all_but_own, blocks_data


def alltoall(sendbuf, recvbuf=None):
    """Send block j of ``sendbuf`` to rank j; block i of ``recvbuf`` comes from rank i.

    Per rank, N = 2: ``[a0 a1]``, ``[b0 b1]`` -> ``[a0 b0]``, ``[a1 b1]``.
    """
    return (sendbuf, recvbuf), ()


def run(call, bufs, algorithm):
    """The alltoall implementation (every face): validate, agree, launch; the output."""
    with call.checking():
        sendbuf, recvbuf = bufs()
        n = call.size
        if is_in_place(sendbuf):
            out, dest = recv_out(recvbuf)
            data = dest
        else:
            data, out, dest = recv_as_send(sendbuf, recvbuf)
        whole_blocks("recvbuf" if data is dest else "sendbuf", data, n)
        fn = call.choose(algorithm, nbytes=data.nbytes // n, count=data.size // n,
                         dtype=data.dtype, like=(data, dest))
    call.settle()
    data, pro = snapshot_if(data is dest, data)
    run_call(call, data.size, data.itemsize, fn, data, dest, prologue=pro)
    return out


def Alltoall(comm, call, bnd, algorithm, sendbuf, recvbuf):
    """mpi4py's ``Alltoall``: its buffer forms parsed, then :func:`run`."""
    n = comm.Get_size()

    def bufs():
        s = parse_bufspec("sendbuf", sendbuf, blocks=n, bnd=bnd)
        return s, recv_spec("recvbuf", recvbuf, s, bnd, blocks=n)
    run(call, bufs, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """Alltoall's algorithm arguments on ``rank``, arrays as lengths (``Len``)."""
    return (Len(size * count), Len(size * count))


class AlltoallSpec(Spec):
    """The bench and test spec of alltoall."""

    blocked = True
    raw = "comm.Alltoall(sendbuf, recvbuf)"
    native_coll = "alltoall"
    torch_fn = "all_to_all_single"

    busbw = all_but_own

    def alloc(self, c):
        """N blocks to send and N to receive, on every rank."""
        c.send, c.recv = c.am.empty(c.count, c.dtype), c.am.empty(c.count, c.dtype)

    def input_fn(self, c):     # block j goes to rank j
        """This rank's input: block j goes to rank j."""
        return lambda g: blocks_data(c.rank * c.n + g // c.block, g % c.block, c.dtype)

    def output_fn(self, c):    # block i came from rank i
        """This rank's expected output: block i came from rank i."""
        return lambda g: blocks_data((g // c.block) * c.n + c.rank, g % c.block, c.dtype)

    def args(self, c):
        """The arguments: ``(send, recv)``."""
        return (c.send, c.recv)

    def raw_call(self, c, comm):
        """``comm.Alltoall(sendbuf, recvbuf)``."""
        return lambda: comm.Alltoall(c.send, c.recv)

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.all_to_all_single(output, input)``."""
        return lambda: fn(recv, send, group=group)


def symbolic(k):
    """The verifier's spec: block i of rank r's recvbuf ends as block r of rank i's sendbuf."""
    c, N = k.n, k.N
    ranks = []
    for r in range(N):
        x = k.mode.inp(r, k.ar(N * c))
        want = k.concat([k.mode.inp(i, k.ar(r * c, (r + 1) * c)) for i in range(N)]) \
            if c else k.mode.orig(0)
        ranks.append(k.Rank((k.Len(N * c), k.Len(N * c)), [x, k.mode.orig(N * c)], [x, want],
                            ["in", "out"]))
    return ranks


def soak(k):
    """The soak's case: as ``comm.Alltoall``; sendbuf kept."""
    send = k.data([k.rank, 11], k.size * k.c)
    keep = send.copy()
    got = k.run(k.api.alltoall, send, None)
    want = k.empty(k.size * k.c)
    k.comm.Alltoall(send, want)
    if not np.array_equal(send, keep):
        return "alltoall modified sendbuf"
    return got, want


#: auto's rule: Bruck's log N messages for small blocks on many ranks, pairwise exchange
#: beyond.
AUTO = Auto(Rule("bruck", (n.named("blocks") <= 256) & (N >= 8)), Rule("pairwise"))

PRIMITIVE = define(Primitive("alltoall", run=run, api=(alltoall,), methods=(Alltoall,),
                             call_arrays=call_arrays, spec=AlltoallSpec(),
                             auto=AUTO, symbolic=symbolic, soak=soak))
