"""scatter: block i of the root's buffer into rank i's (``MPI_Scatter``)."""
import numpy as np
from mpi4py import MPI

from ..args.buffers import (
    as_array,
    check_no_alias,
    check_size,
    is_in_place,
    not_in_place,
    same_dtype,
    same_memory,
    whole_blocks,
)
from ..args.bufspec import is_rank, missing, parse_bufspec
from ..core.rules import Auto, Rule
from ..engine.launch import run_call
from ..sched.inspect import Len
from ._common import recv_block, rooted
from .primitive import Primitive, define
from .spec import RootedBlocks, blocks_data


def scatter(sendbuf, recvbuf, root=0):
    """Send block i of ``sendbuf`` on ``root`` into ``recvbuf`` on rank i; return recvbuf.

    ``sendbuf`` (N blocks) matters only on the root. ``recvbuf=MPI.IN_PLACE``
    on the root leaves its block where it is (and returns None there).
    Per rank, N = 3: root's ``[1 1 2 2 3 3]`` -> ``[1 1]``, ``[2 2]``, ``[3 3]``.
    """
    return (sendbuf, recvbuf), (root,)


def run(call, bufs, root, algorithm):
    """The scatter implementation (every face): validate, agree, launch; the output."""
    with call.checking():
        root, is_root, sendbuf, recvbuf = rooted(call, bufs, root)
        n = call.size
        data = None
        if is_in_place(recvbuf):
            if not is_root:
                raise not_in_place("recvbuf", "on the root")
            data = as_array("sendbuf", sendbuf)
            # The root's block stays where it is; algorithms get a scratch copy.
            c = whole_blocks("sendbuf", data, n)
            out, dest = None, data[root * c:(root + 1) * c].copy()
        else:
            out, dest = recv_block(recvbuf, "every rank needs one")
            if is_root:
                data = as_array("sendbuf", sendbuf)
                same_memory("recvbuf", dest, "sendbuf", data)
                same_dtype("recvbuf", dest, "sendbuf", data)
                check_size("sendbuf", data, n * dest.size, f"{n} ranks x {dest.size}")
                check_no_alias("sendbuf", data, "recvbuf", dest)
        fn = call.choose(algorithm, nbytes=dest.nbytes, count=dest.size, dtype=dest.dtype,
                         root=root, like=(data, dest))
    call.settle()
    run_call(call, dest.size, dest.itemsize, fn, data, dest, root)
    return out


def Scatter(comm, call, bnd, algorithm, sendbuf, recvbuf, root=0):
    """mpi4py's ``Scatter``: its buffer forms parsed, then :func:`run`."""
    n = comm.Get_size()

    def bufs():
        root_here = is_rank(root, comm.Get_rank())
        s = None
        if root_here:                            # elsewhere sendbuf is not looked at (mpi4py)
            s = parse_bufspec("sendbuf", sendbuf, blocks=n, bnd=bnd)
            if s is MPI.IN_PLACE:
                raise missing("sendbuf", sendbuf)
        r = parse_bufspec("recvbuf", recvbuf, bnd=bnd, role="recv")
        if r is MPI.IN_PLACE and not root_here:
            r = None          # reported by run: every rank but the root needs one
        return s, r
    run(call, bufs, root, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """Scatter's algorithm arguments on ``rank``, arrays as lengths (``Len``)."""
    return (Len(size * count) if rank == root else None, Len(count), root)


class ScatterSpec(RootedBlocks):
    """The bench and test spec of scatter."""

    raw = "comm.Scatter(sendbuf, recvbuf, root)"
    native_coll = "scatter"
    torch_fn = "scatter"

    def alloc(self, c):
        """N blocks to send on the root; a block to receive on every rank."""
        c.send = c.am.empty_on(c.rank == c.root, c.count, c.dtype)
        c.recv = c.am.empty(c.block, c.dtype)

    def input_fn(self, c):
        """Block i holds rank i's block."""
        return lambda g: blocks_data(g // c.block, g % c.block, c.dtype)

    def output_fn(self, c):
        """This rank's block."""
        return lambda g: blocks_data(c.rank, g, c.dtype)

    def raw_call(self, c, comm):
        """``comm.Scatter(sendbuf, recvbuf, root)``."""
        return lambda: comm.Scatter(c.send, c.recv, c.root)

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.scatter(tensor, scatter_list, src=root)``: the blocks as the list."""
        ins = list(send.chunk(c.n)) if send is not None else None
        return lambda: fn(recv, ins, src=c.root, group=group)


def symbolic(k):
    """The verifier's spec: rank r's recvbuf ends as block r of the root's sendbuf."""
    c, N = k.n, k.N
    src = k.mode.inp(k.root, k.ar(N * c))
    ranks = []
    for r in range(N):
        mine = src[r * c:(r + 1) * c]
        if r == k.root:
            ranks.append(k.Rank((k.Len(N * c), k.Len(c), k.root), [src, k.mode.orig(c)],
                                [src, mine], ["in", "out"]))
        else:
            ranks.append(k.Rank((None, k.Len(c), k.root), [k.mode.orig(c)], [mine], ["out"]))
    return ranks


def soak(k):
    """The soak's case: as ``comm.Scatter``; in place, the root's sendbuf kept, None returned."""
    full = k.data([k.root, 7], k.size * k.c)
    send = full.copy() if k.is_root else None
    if k.in_place and k.is_root:
        res = k.api.scatter(send, MPI.IN_PLACE, k.root, **k.kw)
        got = None if res is not None else send[k.root * k.c:(k.root + 1) * k.c].copy()
        if not np.array_equal(send, full):
            return "scatter modified the root's sendbuf"
    else:
        got = k.api.scatter(send, k.empty(k.c), k.root, **k.kw)
    want = k.empty(k.c)
    k.comm.Scatter(full if k.is_root else None, want, k.root)
    if got is None:
        return "scatter in place returned a value on the root"
    return got, want


#: auto's rule.
AUTO = Auto(Rule("binomial"))

PRIMITIVE = define(Primitive("scatter", run=run, api=(scatter,), methods=(Scatter,),
                             call_arrays=call_arrays, spec=ScatterSpec(),
                             auto=AUTO, symbolic=symbolic, soak=soak))
