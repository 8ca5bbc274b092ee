"""P2PComm against MPI itself: every wrapped method x buffer form, same data.

Each call is made twice, once on ``P2PComm(COMM_WORLD)`` and once on a plain
duplicate of COMM_WORLD, and the receive buffers must be bitwise equal.
"""
import array

import numpy as np
import pytest
from mpi4py import MPI
from refdata import data, usable

import mpicoll

WORLD = MPI.COMM_WORLD
N, RANK = WORLD.Get_size(), WORLD.Get_rank()
PLAIN = WORLD.Dup()


def algorithms_choices():
    """One P2PComm per algorithm column: choices cycle through every algorithm."""
    width = max(len(usable(p)) - 1 for p in mpicoll.PRIMITIVES)
    out = []
    for i in range(width):
        ch = {}
        for p in mpicoll.PRIMITIVES:
            names = [a for a in usable(p) if a != "native"]
            ch[p] = names[i % len(names)]
        out.append(ch)
    return out


CHOICES = algorithms_choices()


def forms(arr, dt):
    """mpi4py buffer forms for a 1-D array (all describe the whole array)."""
    return {
        "plain": lambda a: a,
        "buf_datatype": lambda a: [a, dt],
        "buf_count_datatype": lambda a: [a, a.size, dt],
        "buf_count_displ_datatype": lambda a: [a, (a.size, 0), dt],
        "buf_count": lambda a: [a, a.size],
    }


@pytest.fixture(params=range(len(CHOICES)),
                ids=lambda i: "-".join(CHOICES[i][p] for p in ("allreduce", "bcast")))
def pcomm(request):
    return mpicoll.P2PComm(WORLD, **CHOICES[request.param])


def both(method, make_args, pcomm):
    """Run ``method`` on P2PComm and on plain MPI with fresh buffers; return outputs."""
    outs = []
    for comm in (pcomm, PLAIN):
        args, outputs = make_args()
        getattr(comm, method)(*args)
        outs.append([np.array(o, copy=True, order="C") for o in outputs])
    for a, b in zip(*outs, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8)), \
            (method, a, b)
    return outs[0]


FORM_NAMES = ["plain", "buf_datatype", "buf_count_datatype", "buf_count_displ_datatype"]


@pytest.mark.mpi
@pytest.mark.parametrize("form", FORM_NAMES)
def test_methods_buffer_forms(pcomm, form):
    c = 5
    for dt, mpit in (("float64", MPI.DOUBLE), ("int32", MPI.INT)):
        f = forms(None, mpit)[form]
        x = data(RANK, c, dt)
        for root in sorted({0, N - 1}):
            def bcast(x=x, root=root, dt=dt, f=f):
                buf = x.copy() if RANK == root else np.zeros(c, dt)
                return (f(buf), root), [buf]
            both("Bcast", bcast, pcomm)

            def reduce_(dt=dt, f=f, x=x, root=root):
                r = np.zeros(c, dt)
                return (f(x), f(r), MPI.SUM, root), [r if RANK == root else np.zeros(c, dt)]
            both("Reduce", reduce_, pcomm)

            def gather(dt=dt, mpit=mpit, f=f, x=x, root=root):
                r = np.zeros(N * c, dt)
                rs = ([r, c, mpit] if form == "buf_count_datatype"
                      else f(r) if form != "buf_count_displ_datatype" else [r, mpit])
                return (f(x), rs, root), [r]
            both("Gather", gather, pcomm)

            def scatter(dt=dt, mpit=mpit, f=f, root=root):
                s = np.concatenate([data(r, c, dt, salt=3) for r in range(N)])
                ss = ([s, c, mpit] if form == "buf_count_datatype"
                      else f(s) if form != "buf_count_displ_datatype" else [s, mpit])
                r = np.zeros(c, dt)
                return (ss, f(r), root), [r]
            both("Scatter", scatter, pcomm)

        def allreduce(dt=dt, f=f, x=x):
            r = np.zeros(c, dt)
            return (f(x), f(r), MPI.MAX), [r]
        both("Allreduce", allreduce, pcomm)

        def allgather(dt=dt, mpit=mpit, f=f, x=x):
            r = np.zeros(N * c, dt)
            rs = ([r, c, mpit] if form == "buf_count_datatype"
                  else f(r) if form != "buf_count_displ_datatype" else [r, mpit])
            return (f(x), rs), [r]
        both("Allgather", allgather, pcomm)

        def rsb(dt=dt, mpit=mpit, f=f):
            s = data(RANK, N * c, dt)
            r = np.zeros(c, dt)
            # mpi4py: a count in sendbuf's spec is per block, like Alltoall's.
            ss = ([s, c, mpit] if form == "buf_count_datatype"
                  else f(s) if form != "buf_count_displ_datatype" else [s, mpit])
            return (ss, f(r), MPI.SUM), [r]
        both("Reduce_scatter_block", rsb, pcomm)

        def rs(dt=dt, f=f):
            counts = [(i % 3) + 1 for i in range(N)]
            s = data(RANK, sum(counts), dt)
            r = np.zeros(counts[RANK], dt)
            return (f(s), f(r), counts, MPI.SUM), [r]
        both("Reduce_scatter", rs, pcomm)

        def alltoall(dt=dt, mpit=mpit, f=f):
            s = data(RANK, N * c, dt)
            r = np.zeros(N * c, dt)
            ss, rr = (([s, c, mpit], [r, c, mpit]) if form == "buf_count_datatype"
                      else (f(s), f(r)) if form != "buf_count_displ_datatype"
                      else ([s, mpit], [r, mpit]))
            return (ss, rr), [r]
        both("Alltoall", alltoall, pcomm)
    pcomm.Barrier()


@pytest.mark.mpi
def test_in_place_forms(pcomm):
    c = 4
    dt = "int64"
    for root in sorted({0, N - 1}):
        def reduce_ip(root=root):
            r = data(RANK, c, dt)
            if RANK == root:
                return (MPI.IN_PLACE, r, MPI.SUM, root), [r]
            return (r, None, MPI.SUM, root), [np.zeros(c, dt)]
        both("Reduce", reduce_ip, pcomm)

        def gather_ip(root=root):
            r = np.zeros(N * c, dt)
            if RANK == root:
                r[root * c:(root + 1) * c] = data(RANK, c, dt)
                return (MPI.IN_PLACE, r, root), [r]
            return (data(RANK, c, dt), None, root), [np.zeros(1, dt)]
        both("Gather", gather_ip, pcomm)

        def scatter_ip(root=root):
            s = np.concatenate([data(r, c, dt) for r in range(N)])
            if RANK == root:
                return (s, MPI.IN_PLACE, root), [s]
            r = np.zeros(c, dt)
            return (None, r, root), [r]
        both("Scatter", scatter_ip, pcomm)

    def allreduce_ip():
        r = data(RANK, c, dt)
        return (MPI.IN_PLACE, r, MPI.SUM), [r]
    both("Allreduce", allreduce_ip, pcomm)

    def allreduce_none():        # mpi4py treats None like IN_PLACE
        r = data(RANK, c, dt)
        return (None, r, MPI.BXOR), [r]
    both("Allreduce", allreduce_none, pcomm)

    def allgather_ip():
        r = np.zeros(N * c, dt)
        r[RANK * c:(RANK + 1) * c] = data(RANK, c, dt)
        return (MPI.IN_PLACE, r), [r]
    both("Allgather", allgather_ip, pcomm)

    def rsb_ip():
        r = data(RANK, N * c, dt)
        return (MPI.IN_PLACE, r, MPI.SUM), [r[:c]]
    both("Reduce_scatter_block", rsb_ip, pcomm)

    def rs_ip():
        counts = [(i % 2) + 1 for i in range(N)]
        r = data(RANK, sum(counts), dt)
        return (MPI.IN_PLACE, r, counts, MPI.SUM), [r[:counts[RANK]]]
    both("Reduce_scatter", rs_ip, pcomm)

    def alltoall_ip():
        r = data(RANK, N * c, dt)
        return (MPI.IN_PLACE, r), [r]
    both("Alltoall", alltoall_ip, pcomm)


@pytest.mark.mpi
def test_non_numpy_buffers(pcomm):
    """array.array and bytearray work as in mpi4py."""
    def allreduce():
        s = array.array("d", [RANK + 1.0] * 3)
        r = array.array("d", [0.0] * 3)
        return (s, r, MPI.SUM), [np.frombuffer(r, "d")]
    both("Allreduce", allreduce, pcomm)

    def bcast():
        b = bytearray(b"hello" if RANK == 0 else b"\0" * 5)
        return ([b, MPI.BYTE], 0), [np.frombuffer(b, "B")]
    both("Bcast", bcast, pcomm)


@pytest.mark.mpi
def test_reduce_scatter_counts_from_recvbuf(pcomm):
    """recvcounts=None: each rank's count comes from its recvbuf (mpi4py's rule)."""
    def rs():
        counts = [i % 3 + 1 for i in range(N)]
        s = data(RANK, sum(counts), "float64")
        r = np.zeros(counts[RANK])
        return (s, r, None, MPI.SUM), [r]
    both("Reduce_scatter", rs, pcomm)


@pytest.mark.mpi
def test_everything_else_is_the_wrapped_comm():
    comm = mpicoll.P2PComm(WORLD, allreduce="ring")
    assert comm.Compare(WORLD) == MPI.IDENT
    assert comm.Get_rank() == RANK and comm.Get_size() == N
    dup = comm.Dup()
    try:
        assert isinstance(dup, mpicoll.P2PComm) and dup.choices == {"allreduce": "ring"}
        assert dup.Compare(WORLD) == MPI.CONGRUENT
        x = np.full(3, RANK, "i")
        dup.Allreduce(MPI.IN_PLACE, x, MPI.SUM)
        assert (x == N * (N - 1) // 2).all()
    finally:
        dup.Free()
    # Point-to-point and Split are the wrapped communicator's own.
    sub = comm.Split(RANK % 2, RANK)
    try:
        assert sub.Get_size() == len(range(RANK % 2, N, 2))
    finally:
        sub.Free()
    if N > 1:
        buf = np.zeros(1, "i")
        if RANK == 0:
            comm.Send(np.array([42], "i"), 1, tag=7)
        elif RANK == 1:
            comm.Recv(buf, 0, tag=7)
            assert buf[0] == 42
    # Library messages travel on a private duplicate: a pending user message
    # with any tag is never consumed by a collective.
    if N > 1:
        req = None
        if RANK == 0:
            req = comm.Isend(np.array([7], "i"), 1, tag=0x6D63)
        y = np.arange(4.0)
        comm.Allreduce(MPI.IN_PLACE, y, MPI.SUM)
        assert np.array_equal(y, np.arange(4.0) * N)
        if RANK == 1:
            got = np.zeros(1, "i")
            comm.Recv(got, 0, tag=0x6D63)
            assert got[0] == 7
        if req is not None:
            req.Wait()


@pytest.mark.mpi
def test_errors_are_mpi_exceptions():
    comm = mpicoll.P2PComm(WORLD)
    with pytest.raises(MPI.Exception) as info:
        comm.Bcast(np.zeros(3), root=N)
    assert info.value.Get_error_class() == MPI.ERR_ROOT
    assert "root" in str(info.value)
    with pytest.raises(mpicoll.ArgumentError, match="algorithm"):
        mpicoll.P2PComm(WORLD, allreduce="nonsense")
    with pytest.raises(mpicoll.ArgumentError, match="not a primitive"):
        mpicoll.P2PComm(WORLD, allreduc="ring")


@pytest.mark.mpi
def test_review_cases_match_mpi4py(pcomm):
    """In-place Reduce_scatter_block with a per-block count, Fortran-ordered arrays."""
    def rsb_ip_count():
        r = data(RANK, 2 * N, "float64")
        return (MPI.IN_PLACE, [r, 2, MPI.DOUBLE], MPI.SUM), [r[:2]]
    both("Reduce_scatter_block", rsb_ip_count, pcomm)

    def forder_allreduce():
        s = np.asfortranarray(data(RANK, 6, "float64").reshape(2, 3))
        r = np.asfortranarray(np.zeros((2, 3)))
        return (s, r, MPI.SUM), [r]
    both("Allreduce", forder_allreduce, pcomm)


@pytest.mark.mpi
def test_oversized_recvbuf_is_an_error_like_mpi4py(pcomm):
    for comm in (pcomm, PLAIN):
        with pytest.raises(ValueError):
            comm.Allreduce(np.ones(3), np.zeros(5), MPI.SUM)
