"""gather: every rank's block into the root's buffer, in rank order (``MPI_Gather``)."""
from ..args.buffers import (
    as_array,
    is_in_place,
    not_in_place,
    recv_array,
    whole_blocks,
)
from ..args.bufspec import is_rank, parse_bufspec, recv_spec
from ..core.rules import Auto, Rule
from ..engine.launch import run_call
from ..sched.inspect import Len
from ._common import recv_out, rooted
from .primitive import Primitive, define
from .spec import RootedBlocks, blocks_data


def gather(sendbuf, recvbuf=None, root=0):
    """Gather every rank's ``sendbuf`` into ``recvbuf`` (N blocks) on ``root``.

    Allocated results have shape ``(N, *sendbuf.shape)``. Returns None off the root.
    Per rank, N = 3: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> root gets ``[[1 1] [2 2] [3 3]]``.
    """
    return (sendbuf, recvbuf), (root,)


def run(call, bufs, root, algorithm):
    """The gather implementation (every face): validate, agree, launch; the output on the root."""
    with call.checking():
        root, is_root, sendbuf, recvbuf = rooted(call, bufs, root)
        n = call.size
        out = dest = None
        if is_in_place(sendbuf):
            if not is_root:
                raise not_in_place("sendbuf", "on the root")
            out, dest = recv_out(recvbuf)
            c = whole_blocks("recvbuf", dest, n)
            data = dest[root * c:(root + 1) * c]
        else:
            data = as_array("sendbuf", sendbuf)
            if is_root:
                out, dest = recv_array("recvbuf", recvbuf, data, n * data.size,
                                       f"{n} ranks x {data.size}", (n,) + sendbuf.shape)
        fn = call.choose(algorithm, nbytes=data.nbytes, count=data.size, dtype=data.dtype,
                         root=root, like=(data, dest))
    call.settle()
    run_call(call, data.size, data.itemsize, fn, data, dest, root)
    return out if is_root else None


def Gather(comm, call, bnd, algorithm, sendbuf, recvbuf, root=0):
    """mpi4py's ``Gather``: its buffer forms parsed, then :func:`run`."""
    n = comm.Get_size()

    def bufs():
        s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
        r = None
        if is_rank(root, comm.Get_rank()):     # elsewhere recvbuf is not looked at (mpi4py)
            r = recv_spec("recvbuf", recvbuf, s, bnd, blocks=n)
        return s, r
    run(call, bufs, root, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """Gather's algorithm arguments on ``rank``, arrays as lengths (``Len``)."""
    return (Len(count), Len(size * count) if rank == root else None, root)


class GatherSpec(RootedBlocks):
    """The bench and test spec of gather."""

    raw = "comm.Gather(sendbuf, recvbuf, root)"
    native_coll = "gather"
    torch_fn = "gather"

    def alloc(self, c):
        """A block to send on every rank; N blocks to receive on the root."""
        c.send = c.am.empty(c.block, c.dtype)
        c.recv = c.am.empty_on(c.rank == c.root, c.count, c.dtype)

    def input_fn(self, c):
        """This rank's block."""
        return lambda g: blocks_data(c.rank, g, c.dtype)

    def output_fn(self, c):
        """Block i holds rank i's block."""
        return lambda g: blocks_data(g // c.block, g % c.block, c.dtype)

    def raw_call(self, c, comm):
        """``comm.Gather(sendbuf, recvbuf, root)``."""
        return lambda: comm.Gather(c.send, c.recv, c.root)

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.gather(tensor, gather_list, dst=root)``: the blocks as the list."""
        outs = list(recv.chunk(c.n)) if recv is not None else None
        return lambda: fn(send, outs, dst=c.root, group=group)


def gathered(k, rooted):
    """Gather's and allgather's spec: block i of the (root's) recvbuf is rank i's input."""
    c, N = k.n, k.N
    blocks = k.concat([k.mode.inp(i, k.ar(c)) for i in range(N)]) if c else k.mode.orig(0)
    ranks = []
    for r in range(N):
        x = k.mode.inp(r, k.ar(c))
        has = not rooted or r == k.root
        args = (k.Len(c), k.Len(N * c) if has else None) + ((k.root,) if rooted else ())
        if not has:
            ranks.append(k.Rank(args, [x], [x], ["in"]))
            continue
        recv = k.mode.orig(N * c)
        if k.inplace:
            recv[r * c:(r + 1) * c] = x
            ranks.append(k.Rank(args, [recv[r * c:(r + 1) * c], recv], [None, blocks],
                                ["in", "out"], alias={0: (1, r * c)}))
        else:
            ranks.append(k.Rank(args, [x, recv], [x, blocks], ["in", "out"]))
    return ranks


def symbolic(k):
    """The verifier's spec: block i of the root's recvbuf ends as rank i's input."""
    return gathered(k, rooted=True)


def soak(k):
    """The soak's case: as ``comm.Gather``; nothing returned off the root."""
    got = k.run(k.api.gather, k.mine, None, k.root, in_place=k.in_place and k.is_root,
                inout=k.own_row)
    want = k.empty(k.size, k.c) if k.is_root else None
    k.comm.Gather(k.mine, want, k.root)
    return k.rooted(got, want, "gather")


#: auto's rule.
AUTO = Auto(Rule("binomial"))

PRIMITIVE = define(Primitive("gather", run=run, api=(gather,), methods=(Gather,),
                             in_place=True,
                             call_arrays=call_arrays, spec=GatherSpec(),
                             auto=AUTO, symbolic=symbolic, soak=soak))
