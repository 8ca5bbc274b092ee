"""reduce_scatter: every rank's vector reduced, block i to rank i (``MPI_Reduce_scatter``).

Two functions share the primitive: ``reduce_scatter_block`` (N equal blocks,
``MPI_Reduce_scatter_block``) and ``reduce_scatter`` (``recvcounts[i]``
elements to rank i).
"""
from mpi4py import MPI

from ..args.buffers import as_array, check_counts, check_size, is_in_place, recv_array
from ..args.bufspec import parse_bufspec, recv_spec
from ..args.user_ops import wrap as wrap_user_op
from ..core.errors import ArgumentError
from ..core.ops import check_op
from ..core.rules import LONG, Auto, Rule, n, non_commutative
from ..engine.launch import run_call
from ..sched.inspect import Len
from ._common import snapshot_if
from .primitive import Primitive, define
from .spec import Spec, all_but_own


def reduce_scatter_block(sendbuf, recvbuf=None, op=MPI.SUM):
    """Reduce ``sendbuf`` (N equal blocks) with ``op``; rank i gets block i.

    Per rank, N = 2, SUM: ``[1 2]``, ``[10 20]`` -> ``[11]``, ``[22]``.
    ``sendbuf=MPI.IN_PLACE``: ``recvbuf`` holds the input; the result goes to its start.
    """
    return (sendbuf, recvbuf), (None, op)


def reduce_scatter(sendbuf, recvbuf=None, recvcounts=None, op=MPI.SUM):
    """Reduce ``sendbuf`` with ``op``; rank i gets the ``recvcounts[i]`` elements of block i.

    ``recvcounts=None`` means N equal blocks (as :func:`reduce_scatter_block`).
    Per rank, N = 2, counts [1, 2], SUM: ``[1 2 3]``, ``[10 20 30]`` -> ``[11]``, ``[22 33]``.
    """
    return (sendbuf, recvbuf), (recvcounts, op)


def run(call, bufs, counts, op, algorithm):
    """The reduce_scatter implementation (every face): validate, agree, launch; the output."""
    with call.checking():
        sendbuf, recvbuf = bufs()
        n = call.size
        if is_in_place(sendbuf):
            full = as_array("recvbuf", recvbuf, writable=True)
        else:
            full = as_array("sendbuf", sendbuf)
        if counts is None:
            if full.size % n:
                raise ArgumentError(
                    f"{'recvbuf' if is_in_place(sendbuf) else 'sendbuf'}: expected a multiple "
                    f"of {n} elements (equal blocks); got {full.size}", MPI.ERR_COUNT)
            counts = [full.size // n] * n
        else:
            counts = check_counts("recvcounts", counts, n)
            total = sum(counts)
            if is_in_place(sendbuf):
                if full.size < total:
                    raise ArgumentError(
                        f"recvbuf: expected at least sum(recvcounts) = {total} elements "
                        f"(in place it holds the input); got {full.size}", MPI.ERR_COUNT)
                full = full[:total]
            else:
                check_size("sendbuf", full, total, "sum(recvcounts)")
        mine = counts[call.rank]
        if is_in_place(sendbuf):
            out, dest = recvbuf, full[:mine]
        else:
            block_shape = (mine,)
            if sendbuf.ndim > 1 and sendbuf.shape[0] == n and len(set(counts)) == 1:
                block_shape = sendbuf.shape[1:]
            out, dest = recv_array("recvbuf", recvbuf, full, mine,
                                   f"recvcounts[{call.rank}]", block_shape)
        check_op(op, full.dtype)
        fn = call.choose(algorithm, op=op, nbytes=full.nbytes, count=full.size,
                         dtype=full.dtype, counts=counts, like=(full, dest))
    call.settle()
    # in place: the result overwrites the start of the input
    full, pro = snapshot_if(is_in_place(sendbuf), full)
    run_call(call, full.size, full.itemsize, fn, full, dest, counts, op, prologue=pro)
    return out


def Reduce_scatter_block(comm, call, bnd, algorithm, sendbuf, recvbuf, op=MPI.SUM):
    """mpi4py's ``Reduce_scatter_block``: its buffer forms parsed, then :func:`run`."""
    op = wrap_user_op(op, comm)      # a user op over a derived datatype: see args.user_ops

    def bufs():
        # mpi4py: counts in these specs are per block; in place, recvbuf holds all N
        # blocks of input.
        n = comm.Get_size()
        s = parse_bufspec("sendbuf", sendbuf, blocks=n, bnd=bnd)
        r = recv_spec("recvbuf", recvbuf, s, bnd, blocks=n if s is MPI.IN_PLACE else 1)
        return bnd.reduction(op, s, r)
    run(call, bufs, None, op, algorithm)


def Reduce_scatter(comm, call, bnd, algorithm, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM):
    """mpi4py's ``Reduce_scatter``: its buffer forms parsed, then :func:`run`."""
    op = wrap_user_op(op, comm)      # a user op over a derived datatype: see args.user_ops
    # run validates ``counts`` after calling bufs(); bufs() fills it, in flat elements
    # (recvcounts are in entries of the datatype).
    counts, parsed = [], []

    def parse():
        s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
        r = recv_spec("recvbuf", recvbuf, s, bnd)
        return bnd.reduction(op, s, r)

    if recvcounts is None:
        # mpi4py's rule: each rank's receive count comes from its recvbuf. Exchanged
        # through the agreement step, so a bad recvbuf on one rank (or another
        # collective called meanwhile) raises on every rank.
        mine = -1
        with call.checking():
            if sendbuf is None or sendbuf is MPI.IN_PLACE:
                raise ArgumentError(
                    "recvcounts: expected the counts with sendbuf=MPI.IN_PLACE (recvbuf then "
                    "holds the whole input, so it cannot give this rank's count); got None",
                    MPI.ERR_COUNT)
            parsed[:] = parse()
            mine = parsed[1].size
        counts[:] = call.exchange(mine)

    def bufs():
        s, r = parsed if parsed else parse()
        if recvcounts is not None:
            k = bnd.per_entry("recvbuf", "sendbuf")
            counts[:] = [c * k for c in check_counts("recvcounts", recvcounts, comm.Get_size())]
        return s, r
    run(call, bufs, counts, op, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=MPI.SUM):
    """``count``: the total (split as ``counts``, or evenly)."""
    if counts is None:
        q, r = divmod(count, size)
        counts = [q + 1] * r + [q] * (size - r)
    return (Len(sum(counts)), Len(counts[rank]), list(counts), op)


class ReduceScatterSpec(Spec):
    """The bench and test spec of reduce_scatter (run as ``reduce_scatter_block``)."""

    function = "reduce_scatter_block"
    reduces = blocked = True
    raw = "comm.Reduce_scatter_block(sendbuf, recvbuf, op)"
    native_coll = "reduce_scatter"
    nccl_method = "reduceScatter"
    torch_fn = "reduce_scatter_tensor"

    busbw = all_but_own

    def call_count(self, c):
        """The whole vector's count."""
        return c.count                             # mpicoll passes the whole vector

    def alloc(self, c):
        """N blocks to send and one to receive, on every rank."""
        c.send, c.recv = c.am.empty(c.count, c.dtype), c.am.empty(c.block, c.dtype)

    def input_fn(self, c):
        """The case's reduction input (``c.red_input``)."""
        return c.red_input

    def output_fn(self, c):
        """This rank's block of the reduction over every rank."""
        return lambda g: c.red_expected(g + c.rank * c.block)

    def args(self, c):
        """The arguments: ``(send, recv, op)``."""
        return (c.send, c.recv, c.op)

    def raw_call(self, c, comm):
        """``comm.Reduce_scatter_block(sendbuf, recvbuf, op)``."""
        return lambda: comm.Reduce_scatter_block(c.send, c.recv, c.op)

    def nccl_args(self, c, send, recv, dtype, op, stream):
        """NCCL's ``reduceScatter(send, recv, recvcount, datatype, op, stream)``: one block."""
        return (send, recv, c.block, dtype, op, stream)

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.reduce_scatter_tensor(output, input, op)``."""
        return lambda: fn(recv, send, op=op, group=group)

    def smpi_actions(self, rank, n, nbytes, root):
        """``<rank> reducescatter <block> ... <block> 0``: ``nbytes`` is all N blocks."""
        b = nbytes // n
        return [f"{rank} reducescatter " + " ".join([str(b)] * n) + " 0"]

    def mpich_choice(self, n, nbytes, itemsize):
        """Pairwise exchange past 512 KiB, else recursive halving."""
        return "mpich_pair" if nbytes > 524288 else "mpich_rdb"


def symbolic(k):
    """The verifier's spec: rank r's recvbuf ends as block r of all ranks' inputs reduced."""
    counts = k.split(k.n, k.N) if k.case.vcounts == "even" else k.v_counts()
    total = sum(counts)
    off = k.offsets(counts)
    full = k.mode.reduction(0, k.N, k.ar(total))
    ranks = []
    for r in range(k.N):
        x = k.mode.inp(r, k.ar(total))
        ranks.append(k.Rank((k.Len(total), k.Len(counts[r]), list(counts), k.op),
                            [x, k.mode.orig(counts[r])], [x, full[off[r]:off[r + 1]]],
                            ["in", "out"]))
    return ranks


def soak(k):
    """The soak's case: as ``comm.Reduce_scatter``; sendbuf kept.

    Random counts (equal ones in place); equal counts not in place run as
    ``reduce_scatter_block`` for an even root.
    """
    c, n = k.c, k.size
    counts = [c] * n if k.in_place else [int(x) for x in k.rng(n, 3).integers(0, c + 1, n)]
    full = k.kept(k.data([k.rank, 5], sum(counts), k.opname), "reduce_scatter modified sendbuf")
    if k.in_place:
        got = k.api.reduce_scatter(MPI.IN_PLACE, full.copy(), counts, k.op, **k.kw)
        got = got[:counts[k.rank]]
    elif counts == [c] * n and k.root % 2 == 0:
        got = k.api.reduce_scatter_block(full, None, k.op, **k.kw)
    else:
        got = k.api.reduce_scatter(full, None, counts, k.op, **k.kw)
    want = k.empty(counts[k.rank])
    k.comm.Reduce_scatter(full, want, counts, k.op)
    return got, want


#: auto's rule (after the shm step, mpicoll.core.defaults.SHM_FROM): reduce_scatterv keeps
#: rank order for non-commutative ops; else recursive halving up to MPICH's long-message
#: threshold, pairwise exchange beyond.
AUTO = Auto(Rule("reduce_scatterv", non_commutative), Rule("recursive_halving", n <= LONG),
            Rule("pairwise"))

PRIMITIVE = define(Primitive("reduce_scatter", run=run,
                             count_kind="vector",
                             api=(reduce_scatter_block, reduce_scatter),
                             methods=(Reduce_scatter_block, Reduce_scatter),
                             call_arrays=call_arrays, spec=ReduceScatterSpec(), reduces=True,
                             auto=AUTO, symbolic=symbolic, soak=soak))
