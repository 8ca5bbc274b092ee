"""Derived datatypes in P2PComm, against MPI itself, bit for bit.

First the examples of the MPI standard's collective chapter that use
derived datatypes and the v-collectives (MPI-4.0 section 6.5, Examples
6.3 to 6.13: a gather into a contiguous receive type, Gatherv of strided
and shrinking columns sent with a vector type and with a resized type,
receive strides that vary, Scatterv into columns), scaled down to
``rows = N + 2`` and run on ``P2PComm(COMM_WORLD)`` and on a plain duplicate
of COMM_WORLD; then bcast / allgather / alltoall / reduce_scatter / scans
with vector, hvector, indexed, hindexed, indexed_block, struct, subarray,
resized, darray and dup types, send and receive type maps that differ with one
signature, negative lower bounds, the nonblocking and persistent faces, and
the errors every rank must raise before any message.

MPICH's own collectives refuse predefined ops on derived datatypes (MPI
defines them on predefined types only); P2PComm reduces a derived datatype
whose elements are all one predefined type element by element. Those
results are compared with what MPI gives for the same elements: packed with
``MPI_Pack``, reduced by the native collective as the predefined type, and
unpacked with ``MPI_Unpack``.
"""
import numpy as np
import pytest
from mpi4py import MPI
from refdata import data

import mpicoll
from mpicoll.args.datatypes import Boundary
from mpicoll.comm import parse_bufspec

WORLD = MPI.COMM_WORLD
N, RANK = WORLD.Get_size(), WORLD.Get_rank()
PLAIN = WORLD.Dup()
PC = mpicoll.P2PComm(WORLD)
ROWS, COLS = N + 2, N + 3         # the standard's 100 x 150 array, scaled down
SENT = -7
INT, DOUBLE = MPI.INT, MPI.DOUBLE

pytestmark = pytest.mark.timeout(120)


def committed(t):
    return t.Commit()


def same(a, b, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a, b)
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), (what, a, b)


def compare(fn, what=""):
    """``fn(comm)`` -> arrays; equal bitwise on P2PComm and on the plain communicator."""
    got, want = fn(PC), fn(PLAIN)
    for a, b in zip(got, want, strict=True):
        same(a, b, what)


def matrix(rank, dt="i"):
    """The sender's ROWS x COLS array (distinct values per rank and position)."""
    return (np.arange(ROWS * COLS).reshape(ROWS, COLS) + 1000 * (rank + 1)).astype(dt)


# -- the MPI standard's examples (MPI-4.0, section 6.5) -------------------------------------------

@pytest.mark.mpi
def test_example_6_3_gather_into_a_contiguous_type():
    """Gather ROWS ints from each rank; the root receives one contiguous(ROWS) per rank."""
    rtype = committed(INT.Create_contiguous(ROWS))
    root = N - 1

    def run(comm):
        rbuf = np.full(N * ROWS, SENT, "i")
        comm.Gather([matrix(RANK)[0, :ROWS].copy(), ROWS, INT], [rbuf, 1, rtype], root)
        return [rbuf]
    compare(run)


@pytest.mark.mpi
def test_examples_6_5_to_6_8_gatherv_columns():
    """6.5: received stride apart; 6.6: column 0 sent with a vector type; 6.7: rank i sends
    ROWS - i ints of column i (vector type); 6.8: the same with a resized int of one row's extent.
    """
    stride = ROWS + 2
    col0 = committed(INT.Create_vector(ROWS, 1, COLS))
    row_int = committed(INT.Create_resized(0, COLS * 4))
    shrinking = committed(INT.Create_vector(ROWS - RANK, 1, COLS))
    counts = [ROWS - i for i in range(N)]
    displs = [i * stride for i in range(N)]

    def run(comm):
        a = matrix(RANK)
        r5, r6, r7, r8 = (np.full(N * stride, SENT, "i") for _ in range(4))
        comm.Gatherv(a[0, :ROWS].copy(), [r5, [ROWS] * N, displs, INT], 0)
        comm.Gatherv([a, 1, col0], [r6, [ROWS] * N, displs, INT], 0)
        comm.Gatherv([a.reshape(-1)[RANK:], 1, shrinking], [r7, counts, displs, INT], 0)
        comm.Gatherv([a.reshape(-1)[RANK:], ROWS - RANK, row_int], [r8, (counts, displs), INT], 0)
        return [r5, r6, r7, r8]
    compare(run)


@pytest.mark.mpi
def test_examples_6_9_and_6_10_varying_receive_strides():
    """6.9: the stride between received blocks varies; 6.10: the counts are gathered first."""
    stype = committed(INT.Create_vector(ROWS - RANK, 1, COLS))
    counts = [ROWS - i for i in range(N)]
    displs, at = [], 0
    for i in range(N):
        displs.append(at)
        at += counts[i] + (i + 1)          # stride[i] = i + 1 elements of gap
    root = N // 2

    def run(comm):
        a = matrix(RANK)
        r9 = np.full(at, SENT, "i")
        comm.Gatherv([a.reshape(-1)[RANK:], 1, stype], [r9, counts, displs, INT], root)
        num = np.array([ROWS - RANK], "i")         # 6.10: each rank's count, gathered first
        got = np.zeros(N, "i")
        comm.Gather(num, got, root)
        r10 = np.full(at, SENT, "i")
        rc = [int(c) for c in got] if RANK == root else None
        comm.Gatherv([a.reshape(-1)[RANK:], 1, stype],
                     [r10, (rc, displs), INT] if RANK == root else None, root)
        return [r9, got, r10]
    compare(run)


@pytest.mark.mpi
def test_examples_6_11_to_6_13_scatter():
    """6.11: Scatter ROWS ints; 6.12: Scatterv stride apart; 6.13: varying stride at the root,
    each rank receiving into column ``rank`` of its array with a vector type.
    """
    stride = ROWS + 2
    counts = [ROWS - i for i in range(N)]
    displs, at = [], 0
    for i in range(N):
        displs.append(at)
        at += counts[i] + (i + 1)
    rtype = committed(INT.Create_vector(ROWS - RANK, 1, COLS))

    def run(comm):
        full = np.arange(max(N * stride, at), dtype="i") + 5
        r11 = np.full(ROWS, SENT, "i")
        comm.Scatter([full, ROWS, INT], r11, 0)
        r12 = np.full(ROWS, SENT, "i")
        comm.Scatterv([full, [ROWS] * N, [i * stride for i in range(N)], INT], r12, N - 1)
        r13 = np.full((ROWS, COLS), SENT, "i")
        comm.Scatterv([full, counts, displs, INT], [r13.reshape(-1)[RANK:], 1, rtype], 0)
        return [r11, r12, r13]
    compare(run)


@pytest.mark.mpi
def test_gather_columns_into_columns_with_a_resized_vector():
    """Each rank's column 1 (a vector type) lands in column ``rank`` of the root's ROWS x N
    matrix through a vector resized to one int: type maps differ, signatures match.
    """
    send = committed(INT.Create_vector(ROWS, 1, COLS))
    column = INT.Create_vector(ROWS, 1, N)
    recv = committed(column.Create_resized(0, 4))
    column.Free()

    def run(comm):
        a = matrix(RANK)
        g = np.full((ROWS, N), SENT, "i")
        comm.Gather([a.reshape(-1)[1:], 1, send], [g, 1, recv], N - 1)
        h = np.full((ROWS, N), SENT, "i")
        comm.Allgather([a.reshape(-1)[1:], 1, send], [h, 1, recv])
        return [g, h]
    compare(run)


@pytest.mark.mpi
def test_scatter_strided_rows():
    """The root holds 2N rows; rank i gets rows i and i + N (a vector of two rows resized to
    one row, so consecutive ranks start one row apart), into a contiguous(2 * COLS) type.
    """
    two_rows = INT.Create_vector(2, COLS, N * COLS)
    send = committed(two_rows.Create_resized(0, COLS * 4))
    two_rows.Free()
    recv = committed(INT.Create_contiguous(2 * COLS))

    def run(comm):
        m = np.arange(2 * N * COLS, dtype="i").reshape(2 * N, COLS)
        r = np.full(2 * COLS + 1, SENT, "i")
        comm.Scatter([m, 1, send], [r, 1, recv], 0)
        s = np.full((2, COLS), SENT, "i")
        comm.Scatter([m, 1, send], s, N - 1)
        return [r, s]
    compare(run)


@pytest.mark.mpi
def test_gatherv_varying_counts_with_a_resized_stride_type():
    """The root receives every other int: a resized int of extent 2, counts varying per rank,
    blocks displaced in extents (so they interleave with gaps).
    """
    every_other = committed(INT.Create_resized(0, 8))
    counts = [(i % 3) + 1 for i in range(N)]
    displs = [3 * i for i in range(N)][::-1]

    def run(comm):
        x = np.arange(counts[RANK], dtype="i") + 10 * RANK
        r = np.full(2 * (3 * N + 3), SENT, "i")
        comm.Gatherv(x, [r, counts, displs, every_other], 0)
        a = np.full(2 * (3 * N + 3), SENT, "i")
        comm.Allgatherv([x, INT], [a, (counts, displs), every_other])
        return [r, a]
    compare(run)


# -- the other collectives, every kind of datatype ----------------------------------------------

def types():
    """Type name -> (committed datatype over doubles, doubles of buffer one entry needs)."""
    t = {
        "contiguous": DOUBLE.Create_contiguous(3),
        "dup": DOUBLE.Dup(),
        "vector": DOUBLE.Create_vector(3, 1, 2),
        "hvector": DOUBLE.Create_hvector(2, 2, 24),
        "indexed": DOUBLE.Create_indexed([1, 2], [3, 0]),       # out of order, one hole
        "hindexed": DOUBLE.Create_hindexed([2, 1], [16, 0]),
        "indexed_block": DOUBLE.Create_indexed_block(1, [4, 0, 2]),
        "subarray": DOUBLE.Create_subarray([3, 4], [2, 2], [1, 1]),
        "resized": DOUBLE.Create_vector(2, 1, 3).Create_resized(0, 16),  # entries interleave
        "neg_lb": DOUBLE.Create_hindexed([1, 1], [-8, 8]),             # data before its address
        "darray": DOUBLE.Create_darray(2, 1, [8], [MPI.DISTRIBUTE_CYCLIC], [2], [2]),
    }
    return {k: committed(v) for k, v in t.items()}


TYPES = types()
# int, hole, 2 doubles
STRUCT = committed(MPI.Datatype.Create_struct([1, 2], [0, 8], [INT, DOUBLE]))


def room(t, count):
    """Doubles of buffer ``count`` entries of ``t`` need, and the displacement (entries) that
    keeps a negative lower bound inside it.
    """
    lb, ext = t.Get_extent()
    tlb, text = t.Get_true_extent()
    displ = 1 if tlb < 0 else 0
    end = displ * ext + (count - 1) * ext + tlb + text
    return (end + 7) // 8 + 1, displ


@pytest.mark.mpi
@pytest.mark.parametrize("name", list(TYPES))
def test_bcast_allgather_alltoall(name):
    """Bcast, Allgather and Alltoall with the type on both sides (holes keep their contents)."""
    t = TYPES[name]
    n1, d1 = room(t, 2)
    nN, dN = room(t, 2 * N)

    def run(comm):
        b = data(0, n1, "float64", salt=1) if RANK == 0 else np.full(n1, SENT, "float64")
        comm.Bcast([b, (2, d1), t], 0)
        g = np.full(nN, SENT, "float64")
        comm.Allgather([data(RANK, n1, "float64"), (2, d1), t], [g, (2, dN), t])
        a = np.full(nN, SENT, "float64")
        comm.Alltoall([data(RANK, nN, "float64", salt=2), (2, dN), t], [a, (2, dN), t])
        return [b, g, a]
    compare(run, name)


@pytest.mark.mpi
def test_struct_of_mixed_types_and_differing_type_maps():
    """A struct {int, hole, 2 doubles} travels as its bytes; a contiguous send received as a
    strided vector (one signature, two layouts).
    """
    k = STRUCT.Get_extent()[1]
    strided = committed(DOUBLE.Create_vector(3, 1, 2))
    contig = committed(DOUBLE.Create_contiguous(3))

    def run(comm):
        b = (np.arange(2 * k, dtype="u1") * (RANK + 1)) % 251
        comm.Bcast([b, 2, STRUCT], N - 1)
        g = np.full(N * k, 0xEE, "u1")
        comm.Allgather([(np.arange(k, dtype="u1") + RANK) % 251, 1, STRUCT], [g, 1, STRUCT])
        s = np.full(6, SENT, "float64")
        comm.Bcast([data(0, 3, "float64") if RANK == 0 else s, 1,
                    contig if RANK == 0 else strided], 0)
        return [b, g, s]
    compare(run)


@pytest.mark.mpi
def test_vector_collectives_with_derived_types():
    """Scatterv, Allgatherv and Alltoallv with derived types on the v side and on the other."""
    col = INT.Create_vector(2, 1, N + 1)
    colr = committed(col.Create_resized(0, 4))
    col.Free()
    pair = committed(INT.Create_contiguous(2))
    counts = [(i % 2) + 1 for i in range(N)]

    def run(comm):
        s = np.full(2 * (N + 1), SENT, "i")
        full = np.arange(2 * (N + 1), dtype="i") * 3
        comm.Scatterv([full, [1] * N, list(range(N))[::-1], colr], [s, 1, colr], N - 1)
        a = np.full(2 * sum(counts) + 3, SENT, "i")
        comm.Allgatherv([np.arange(2 * counts[RANK], dtype="i") + RANK, counts[RANK], pair],
                        [a, (counts, None), pair])
        mine = [(RANK + j) % 2 + 1 for j in range(N)]
        t = np.full(2 * sum(mine) + 2, SENT, "i")
        comm.Alltoallv([np.arange(2 * sum(mine), dtype="i") + 100 * RANK, mine, pair],
                       [t, mine, pair])
        return [s, a, t]
    compare(run)


# -- reductions: compared with MPI on the packed elements ----------------------------------------

def packed(t, count, buf, displ=0):
    """What MPI_Pack makes of ``count`` entries of ``t`` in ``buf`` (as the type's elements)."""
    ext = t.Get_extent()[1]
    out = np.empty(t.Get_size() * count // 8, "float64")
    base = buf.__array_interface__["data"][0] + displ * ext
    t.Pack(MPI.buffer.fromaddress(base, count * ext, True), out, 0, MPI.COMM_SELF)
    return out


def unpacked(t, count, flat, into, displ=0):
    ext = t.Get_extent()[1]
    base = into.__array_interface__["data"][0] + displ * ext
    t.Unpack(flat, 0, MPI.buffer.fromaddress(base, count * ext), MPI.COMM_SELF)
    return into


@pytest.mark.mpi
@pytest.mark.parametrize("name", ["vector", "indexed", "subarray", "neg_lb"])
def test_reductions(name):
    """Allreduce (and in place), Reduce, Reduce_scatter_block, Scan, Exscan over a type whose
    elements are all doubles: the packed elements reduced as MPI reduces them.
    """
    t = TYPES[name]
    n, d = room(t, N)
    k = t.Get_size() // 8
    x = data(RANK, n, "float64")
    got = []
    r = np.full(n, SENT, "float64")
    PC.Allreduce([x, (N, d), t], [r, (N, d), t], MPI.SUM)
    ip = x.copy()
    PC.Allreduce(MPI.IN_PLACE, [ip, (N, d), t], MPI.MAX)
    red = np.full(n, SENT, "float64")
    PC.Reduce([x, (N, d), t], [red, (N, d), t], MPI.SUM, N - 1)
    rsb = np.full(n, SENT, "float64")
    PC.Reduce_scatter_block([x, (1, d), t], [rsb, (1, d), t], MPI.SUM)
    sc = np.full(n, SENT, "float64")
    PC.Scan([x, (N, d), t], [sc, (N, d), t], MPI.PROD)
    ex = np.full(n, SENT, "float64")
    PC.Exscan([x, (N, d), t], [ex, (N, d), t], MPI.SUM)
    got = [r, ip, red, rsb, sc, ex]

    px = packed(t, N, x, d)
    want = []
    for into, op, how in ((np.full(n, SENT, "float64"), MPI.SUM, "all"),
                          (x.copy(), MPI.MAX, "all"),
                          (np.full(n, SENT, "float64"), MPI.SUM, "reduce"),
                          (np.full(n, SENT, "float64"), MPI.SUM, "rsb"),
                          (np.full(n, SENT, "float64"), MPI.PROD, "scan"),
                          (np.full(n, SENT, "float64"), MPI.SUM, "exscan")):
        out = np.empty(N * k)
        if how == "all":
            PLAIN.Allreduce(px, out, op)
        elif how == "reduce":
            PLAIN.Reduce(px, out, op, N - 1)
            if RANK != N - 1:
                want.append(into)
                continue
        elif how == "rsb":
            out = np.empty(k)
            PLAIN.Reduce_scatter_block(px, out, op)
            want.append(unpacked(t, 1, out, into, d))
            continue
        elif how == "scan":
            PLAIN.Scan(px, out, op)
        else:
            PLAIN.Exscan(px, out, op)
            if RANK == 0:
                want.append(into)
                continue
        want.append(unpacked(t, N, out, into, d))
    whats = ["allreduce", "in place", "reduce", "rsb", "scan", "exscan"]
    for a, b, what in zip(got, want, whats, strict=True):
        same(a, b, f"{name} {what}")


@pytest.mark.mpi
def test_reduce_scatter_counts_in_entries():
    """Recvcounts count the datatype's entries (here three doubles each), given or from recvbuf."""
    t = TYPES["contiguous"]
    counts = [(i % 2) + 1 for i in range(N)]
    x = data(RANK, 3 * sum(counts), "float64")
    r = np.full(3 * counts[RANK], SENT, "float64")
    PC.Reduce_scatter([x, sum(counts), t], [r, counts[RANK], t], counts, MPI.SUM)
    q = np.full(3 * counts[RANK], SENT, "float64")
    PC.Reduce_scatter([x, sum(counts), t], [q, counts[RANK], t], None, MPI.SUM)
    want = np.empty(3 * counts[RANK])
    PLAIN.Reduce_scatter(x, want, [3 * c for c in counts], MPI.SUM)
    same(r, want)
    same(q, want)


# -- the nonblocking and persistent faces ---------------------------------------------------------

@pytest.mark.mpi
def test_nonblocking_and_persistent_faces():
    """Unpacked when the request completes; packed again at every Start."""
    t = TYPES["indexed"]
    n, d = room(t, N)

    def run(comm):
        b = data(0, n, "float64") if RANK == 0 else np.full(n, SENT, "float64")
        req = comm.Ibcast([b, (1, d), t], 0)
        g = np.full(n, SENT, "float64")
        x = data(RANK, n, "float64")
        p = comm.Allgather_init([x, (1, d), t], [g, (1, d), t])
        outs = [b]
        req.Wait()
        for step in range(2):
            x[:] = data(RANK + 10 * step, n, "float64")
            p.Start()
            p.Wait()
            outs.append(g.copy())
        p.Free()
        return outs
    compare(run)


# -- no copy where the layout is already contiguous ---------------------------------------------

@pytest.mark.mpi
def test_contiguous_types_are_views():
    a = np.arange(12.0)
    for t in (TYPES["contiguous"], TYPES["dup"]):
        bnd = Boundary(WORLD)
        flat = parse_bufspec("buf", [a, (2, 1), t], bnd=bnd, role="inout")
        assert np.shares_memory(flat, a) and not bnd.inputs and not bnd.outputs
        assert flat.dtype == np.float64 and flat.size == 2 * t.Get_size() // 8
    bnd = Boundary(WORLD)
    flat = parse_bufspec("buf", [a, 2, TYPES["vector"]], bnd=bnd, role="send")
    assert not np.shares_memory(flat, a) and bnd.inputs and not bnd.outputs
    assert np.array_equal(flat, a[[0, 2, 4, 5, 7, 9]])        # packed by MPI at once (a send)


# -- errors: on every rank, before any message --------------------------------------------------

def raises_everywhere(call, match, eclass, bad=None):
    """``call()`` raises ArgumentError with ``match`` on every rank, ``bad`` being the rank
    whose arguments are wrong (None: all); the buffers it was given are not touched.
    """
    with pytest.raises(mpicoll.ArgumentError) as info:
        call()
    text = str(info.value)
    if bad is None or RANK == bad:
        assert info.value.Get_error_class() == eclass, text
    assert __import__("re").search(match, text), text


@pytest.mark.mpi
def test_receives_that_would_write_a_location_twice():
    """MPI forbids a receive that writes any location twice. With a derived datatype the
    blocks are compared by the bytes the datatype itself touches: blocks at the same
    place, and entries of one block that overlap (a type resized below its size), raise
    on every rank before anything moves; blocks that interleave without touching the
    same bytes (the resized-vector idiom: test_gather_columns_into_columns_with_a_resized_vector,
    test_examples_6_5_to_6_8_gatherv_columns) are not refused.
    """
    pair = committed(DOUBLE.Create_contiguous(2))
    two = DOUBLE.Create_contiguous(2)
    shifted = committed(two.Create_resized(0, 8))       # two doubles, one double apart
    two.Free()
    try:
        x, y = np.full(2, RANK + 1.0), np.full(2 * N, float(SENT))
        if N > 1:
            same_place = [0] * N
            raises_everywhere(lambda: PC.Allgatherv([x, DOUBLE], [y, [1] * N, same_place, pair]),
                              "block 0 and block 1 would both write byte 0", MPI.ERR_BUFFER)
            raises_everywhere(lambda: PC.Gatherv(
                [x, DOUBLE], [y, [1] * N, same_place, pair] if RANK == 0 else None, 0),
                "block 0 and block 1 would both write byte 0", MPI.ERR_BUFFER, 0)
            raises_everywhere(lambda: PC.Alltoallv(
                [np.ones(2 * N), [2] * N, [2 * i for i in range(N)], DOUBLE],
                [y, [1] * N, same_place, pair]),
                "block 0 and block 1 would both write byte 0", MPI.ERR_BUFFER)
        big = np.full(2 * N + 1, float(SENT))     # 2N entries one double apart, 2 doubles each
        raises_everywhere(lambda: PC.Allgather([np.ones(4), DOUBLE], [big, 2, shifted]),
                          r"entries of .* overlap: byte 8 would be written twice",
                          MPI.ERR_BUFFER)
        for buf in (y, big):                      # nothing was received
            assert np.array_equal(buf, np.full(buf.size, float(SENT))), buf

        def apart(comm):             # one entry per block, blocks two doubles apart
            w = np.full(2 * N, float(SENT))
            comm.Allgatherv([x, DOUBLE], [w, [1] * N, [2 * i for i in range(N)], shifted])
            return [w]
        compare(apart, "resized type, blocks apart")
    finally:
        pair.Free()
        shifted.Free()


@pytest.mark.mpi
def test_errors_on_every_rank():
    last = N - 1
    v = TYPES["vector"]
    x = np.full(8, 5.0)
    if "Open MPI" not in MPI.Get_library_version():   # Open MPI crashes on uncommitted types
        uncommitted = DOUBLE.Create_vector(2, 1, 2)
        try:
            raises_everywhere(lambda: PC.Bcast([x, 1, uncommitted if RANK == last else v], 0),
                              "committed", MPI.ERR_TYPE, last)
        finally:
            uncommitted.Free()
    # three entries of a vector(3, 1, 2) (extent 40 bytes) reach byte 120: not in 8 doubles
    raises_everywhere(lambda: PC.Bcast([x, 3 if RANK == last else 1, v], 0),
                      r"reach bytes \[0, 120\)", MPI.ERR_COUNT, last)
    big = np.zeros(5 * N)
    raises_everywhere(lambda: PC.Allgather([x, 1, v], [big, -1 if RANK == 0 else 1, v]),
                      "non-negative count", MPI.ERR_COUNT, 0)
    neg = TYPES["neg_lb"]
    raises_everywhere(lambda: PC.Bcast([x, 1, neg], 0), r"reach bytes \[-8, 16\)",
                      MPI.ERR_COUNT)
    if N > 1:
        ro = bytes(64)                         # read-only: cannot receive
        raises_everywhere(lambda: PC.Bcast([ro if RANK == last else x.copy(), 1, v], 0),
                          "writable", MPI.ERR_BUFFER, last)
    r = np.zeros(8)
    s = np.zeros(8, "u1")
    raises_everywhere(lambda: PC.Allreduce([s, 0, STRUCT], [s.copy(), 0, STRUCT], MPI.SUM),
                      "every element is one predefined type", MPI.ERR_OP)
    raises_everywhere(lambda: PC.Allreduce([x, 1, v], [r, 3, DOUBLE], MPI.SUM),
                      "one datatype for both", MPI.ERR_TYPE)
    raises_everywhere(lambda: PC.Gatherv(x[:3], [r, [1] * N, [1] * N, v] if RANK == 0 else None,
                                         0),
                      "block 0", MPI.ERR_COUNT, 0)
    assert np.array_equal(x, np.full(8, 5.0)) and np.array_equal(r, np.zeros(8))
