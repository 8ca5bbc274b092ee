"""P2PComm takes every buffer form mpi4py takes, and gives mpi4py's (MPI's) results.

Every overridden method x every form (``buf``, ``[buf, dt]``,
``[buf, count, dt]``, ``[buf, (count, displ), dt]``, ``[buf, count, displ,
dt]``, mpi4py's six v-forms, ``None``/``[None, dt]`` empty messages,
``MPI.IN_PLACE``/None where MPI allows it) x every kind of buffer object
(NumPy, ``array.array``, ``bytearray``, and wrappers exposing *only* DLPack
or *only* ``__cuda_array_interface__`` over host memory) runs on
``P2PComm(COMM_WORLD)`` and on a plain duplicate of COMM_WORLD with the same
data; receive buffers (gaps and untouched elements included) must be
bitwise equal. The kind rotates with the method and the form, so every
method meets every form and every kind, and every form every kind, in a few
hundred calls: the file runs at N = 1..8 under a tight time budget.
"""
import array

import numpy as np
import pytest
from mpi4py import MPI
from refdata import data

import mpicoll

WORLD = MPI.COMM_WORLD
N, RANK = WORLD.Get_size(), WORLD.Get_rank()
PLAIN = WORLD.Dup()                      # mpi4py's own collectives: the reference
PC = mpicoll.P2PComm(WORLD)
SENT = 77                                # what untouched elements hold
C = 3                                    # elements per rank of the block collectives

pytestmark = pytest.mark.timeout(120)


# -- buffer objects exposing one protocol only --------------------------------------

class DLPackOnly:
    """Only ``__dlpack__``/``__dlpack_device__`` (as JAX and PyTorch give), over a NumPy array."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class CAIOnly:
    """Only ``__cuda_array_interface__``, at host memory (mpi4py hands the pointer to MPI)."""

    def __init__(self, a):
        self._a = a

    @property
    def __cuda_array_interface__(self):
        ai = self._a.__array_interface__
        return {"version": 3, "shape": ai["shape"], "typestr": ai["typestr"],
                "data": ai["data"], "strides": None}


KINDS = ["numpy", "array", "bytearray", "dlpack", "cai"]


def wrap(arr, kind):
    """(the object handed to MPI, a NumPy view of its memory)."""
    if kind == "numpy":
        return arr, arr
    if kind == "array":
        obj = array.array(arr.dtype.char, arr.tobytes())
        return obj, np.frombuffer(obj, arr.dtype)
    if kind == "bytearray":
        obj = bytearray(arr.tobytes())
        return obj, np.frombuffer(obj, arr.dtype)
    if kind == "dlpack":
        return DLPackOnly(arr), arr
    return CAIOnly(arr), arr


def pick(i, form, typed):
    """The kind for case ``i``: rotating; a bytearray only where a datatype types its bytes."""
    kind = KINDS[i % len(KINDS)]
    if kind == "bytearray" and not typed(form):
        kind = "array"
    return kind


def mpitype(dt):
    return MPI.Datatype.fromcode(np.dtype(dt).char)


# -- the forms ----------------------------------------------------------------------

SIMPLE = ["buf", "dt", "count", "displ", "displ4"]


def simple_typed(form):
    return form != "buf"


def simple(arr, form, kind, count=None):
    """``arr`` in one of mpi4py's forms; ``count``: the count given (per block), default all.

    The displacement forms put one untouched element before the data and give displ=1.
    """
    dt = mpitype(arr.dtype)
    if form in ("displ", "displ4"):
        arr = np.concatenate([np.full(1, SENT, arr.dtype), arr])
    n = arr.size - (form in ("displ", "displ4")) if count is None else count
    obj, view = wrap(arr, kind)
    return {"buf": obj, "dt": [obj, dt], "count": [obj, n, dt], "displ": [obj, (n, 1), dt],
            "displ4": [obj, n, 1, dt]}[form], view


# (mpicoll also takes mpi4py 3's [buf, counts, displs]; mpi4py 4 reads the third item as a
# datatype)
VFORMS = ["buf", "counts", "tuple", "counts_dt", "tuple_dt", "four"]


def v_typed(form):
    return form in ("counts_dt", "tuple_dt", "four")


def v_layout(form, counts):
    """(counts, displs, buffer length) of a v-form: displacements in reverse rank order, gaps."""
    if form == "buf":
        counts = [C] * N                  # a bare buffer splits evenly
        return counts, [C * i for i in range(N)], C * N
    if form in ("counts", "counts_dt"):
        displs = list(np.cumsum([0] + counts[:-1]))
        return counts, displs, sum(counts) + 1
    displs, at = [0] * N, 1
    for i in reversed(range(N)):
        displs[i] = at
        at += counts[i] + 1
    return counts, displs, at + 1


def vspec(arr, form, kind, counts, displs):
    dt = mpitype(arr.dtype)
    obj, view = wrap(arr, kind)
    return {"buf": obj, "counts": [obj, counts], "tuple": [obj, (counts, displs)],
            "counts_dt": [obj, counts, dt],
            "tuple_dt": [obj, (counts, displs), dt], "four": [obj, counts, displs, dt]}[form], view


# -- running a call on both communicators ------------------------------------------------

def both(method, make, what=""):
    """``make()`` -> (args, outputs), fresh buffers; run on P2PComm and PLAIN; equal bitwise."""
    outs = []
    for comm in (PC, PLAIN):
        args, outputs = make()
        getattr(comm, method)(*args)
        outs.append([np.array(o, copy=True) for o in outputs])
    for a, b in zip(*outs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, (method, what, a, b)
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), (method, what, a, b)


def sentinel(n, dt):
    return np.full(n, SENT, dt)


def dtype_of(i):
    return ("float64", "int32")[i % 2]


# -- the block collectives ------------------------------------------------------------------

def case_bcast(i, form, kind, dt):
    root = i % N

    def make():
        buf = data(root, C, dt, salt=1) if RANK == root else sentinel(C, dt)
        s, v = simple(buf, form, kind)
        return (s, root), [v]
    both("Bcast", make, (form, kind))


def case_reduce(i, form, kind, dt):
    root = (i + 1) % N

    def make():
        s, _ = simple(data(RANK, C, dt), form, kind)
        r, v = simple(sentinel(C, dt), form, kind)
        return (s, r, MPI.SUM, root), [v]          # off the root recvbuf is not looked at
    both("Reduce", make, (form, kind))


def case_allreduce(i, form, kind, dt):
    def make():
        s, _ = simple(data(RANK, C, dt), form, kind)
        r, v = simple(sentinel(C, dt), form, kind)
        return (s, r, MPI.MAX), [v]
    both("Allreduce", make, (form, kind))


def case_gather(i, form, kind, dt):
    root = (i + 2) % N

    def make():
        s, _ = simple(data(RANK, C, dt), form, kind)
        r, v = simple(sentinel(N * C, dt), form, kind, count=C)
        return (s, r if RANK == root else None, root), [v]
    both("Gather", make, (form, kind))


def case_allgather(i, form, kind, dt):
    def make():
        s, _ = simple(data(RANK, C, dt), form, kind)
        r, v = simple(sentinel(N * C, dt), form, kind, count=C)
        return (s, r), [v]
    both("Allgather", make, (form, kind))


def case_scatter(i, form, kind, dt):
    root = (i + 3) % N

    def make():
        s, _ = simple(data(root, N * C, dt, salt=2), form, kind, count=C)
        r, v = simple(sentinel(C, dt), form, kind)
        return (s if RANK == root else None, r, root), [v]
    both("Scatter", make, (form, kind))


def case_reduce_scatter_block(i, form, kind, dt):
    def make():
        s, _ = simple(data(RANK, N * C, dt), form, kind, count=C)   # per block, as mpi4py
        r, v = simple(sentinel(C, dt), form, kind)
        return (s, r, MPI.SUM), [v]
    both("Reduce_scatter_block", make, (form, kind))


def case_reduce_scatter(i, form, kind, dt):
    counts = [(j % 3) + 1 for j in range(N)]

    def make():
        s, _ = simple(data(RANK, sum(counts), dt), form, kind)
        r, v = simple(sentinel(counts[RANK], dt), form, kind)
        # recvcounts given, or (every other case) taken from each rank's recvbuf
        return (s, r, counts if i % 2 else None, MPI.SUM), [v]
    both("Reduce_scatter", make, (form, kind))


def case_alltoall(i, form, kind, dt):
    def make():
        s, _ = simple(data(RANK, N * C, dt), form, kind, count=C)
        r, v = simple(sentinel(N * C, dt), form, kind, count=C)
        return (s, r), [v]
    both("Alltoall", make, (form, kind))


def case_scan(i, form, kind, dt):
    def make():
        s, _ = simple(data(RANK, C, dt), form, kind)
        r, v = simple(sentinel(C, dt), form, kind)
        return (s, r, MPI.SUM), [v]
    both("Scan", make, (form, kind))


def case_exscan(i, form, kind, dt):
    def make():
        s, _ = simple(data(RANK, C, dt), form, kind)
        r, v = simple(sentinel(C, dt), form, kind)
        return (s, r, MPI.SUM), [v if RANK else v[:0]]   # rank 0's result is undefined in MPI
    both("Exscan", make, (form, kind))


BLOCK = {"Bcast": case_bcast, "Reduce": case_reduce, "Allreduce": case_allreduce,
         "Gather": case_gather, "Allgather": case_allgather, "Scatter": case_scatter,
         "Reduce_scatter_block": case_reduce_scatter_block,
         "Reduce_scatter": case_reduce_scatter, "Alltoall": case_alltoall,
         "Scan": case_scan, "Exscan": case_exscan}


@pytest.mark.mpi
@pytest.mark.parametrize("method", list(BLOCK))
def test_block_forms(method):
    """Each simple form, each with a kind of buffer object, against mpi4py."""
    m = list(BLOCK).index(method)
    for f, form in enumerate(SIMPLE):
        i = m + f
        BLOCK[method](i, form, pick(i, form, simple_typed), dtype_of(i))


# -- the vector collectives ---------------------------------------------------------------

def vcounts():
    return [(j % 3) + 1 for j in range(N)]


def case_gatherv(i, form, kind, dt):
    root = i % N
    counts, displs, n = v_layout(form, vcounts())
    sform = SIMPLE[i % len(SIMPLE)]
    skind = pick(i, sform, simple_typed)

    def make():
        s, _ = simple(data(RANK, counts[RANK], dt), sform, skind)
        r, v = vspec(sentinel(n, dt), form, kind, counts, displs)
        return (s, r if RANK == root else None, root), [v]
    both("Gatherv", make, (form, kind))


def case_scatterv(i, form, kind, dt):
    root = (i + 1) % N
    counts, displs, n = v_layout(form, vcounts())
    rform = SIMPLE[i % len(SIMPLE)]
    rkind = pick(i + 1, rform, simple_typed)

    def make():
        s, _ = vspec(data(root, n, dt, salt=3), form, kind, counts, displs)
        r, v = simple(sentinel(counts[RANK], dt), rform, rkind)
        return (s if RANK == root else None, r, root), [v]
    both("Scatterv", make, (form, kind))


def case_allgatherv(i, form, kind, dt):
    counts, displs, n = v_layout(form, vcounts())
    sform = SIMPLE[(i + 2) % len(SIMPLE)]
    skind = pick(i + 2, sform, simple_typed)

    def make():
        s, _ = simple(data(RANK, counts[RANK], dt), sform, skind)
        r, v = vspec(sentinel(n, dt), form, kind, counts, displs)
        return (s, r), [v]
    both("Allgatherv", make, (form, kind))


def case_alltoallv(i, form, kind, dt):
    mine = [(RANK + j) % 3 + 1 for j in range(N)]    # to rank j; rank j sends me as many
    scounts, sdispls, sn = v_layout(form, mine)
    rcounts, rdispls, rn = v_layout(form, mine)

    def make():
        s, _ = vspec(data(RANK, sn, dt), form, kind, scounts, sdispls)
        r, v = vspec(sentinel(rn, dt), form, kind, rcounts, rdispls)
        return (s, r), [v]
    both("Alltoallv", make, (form, kind))


VECTOR = {"Gatherv": case_gatherv, "Scatterv": case_scatterv, "Allgatherv": case_allgatherv,
          "Alltoallv": case_alltoallv}


@pytest.mark.mpi
@pytest.mark.parametrize("method", list(VECTOR))
def test_vector_forms(method):
    """Each of mpi4py's v-forms, each with a kind of buffer object, against mpi4py."""
    m = list(VECTOR).index(method)
    for f, form in enumerate(VFORMS):
        i = m + f
        VECTOR[method](i, form, pick(i, form, v_typed), dtype_of(i))


# -- every form meets every kind ---------------------------------------------------------------

@pytest.mark.mpi
def test_vector_forms_with_the_remaining_kinds():
    """The block forms meet every kind across test_block_forms' methods; the v-forms meet
    four kinds across test_vector_forms': here each v-form meets the fifth.
    """
    for f, form in enumerate(VFORMS):
        i = f + len(VECTOR)
        case_allgatherv(i, form, pick(i, form, v_typed), dtype_of(i))


# -- empty messages: None, [None, datatype] ---------------------------------------------------

NONE_FORMS = [lambda dt: [None, dt], lambda dt: [None, 0, dt], lambda dt: [None, (0, 0), dt],
              lambda dt: [None, 0, 0, dt]]
V_NONE_FORMS = [lambda dt: [None, dt], lambda dt: [None, [0] * N, dt],
                lambda dt: [None, ([0] * N, [0] * N), dt], lambda dt: [None, [0] * N, [0] * N, dt]]


@pytest.mark.mpi
def test_none_buffers_are_empty_messages():
    """``[None, datatype]`` and its count-0 forms, in every method, as mpi4py takes them."""
    root = N - 1

    def calls(e, v):
        return [("Bcast", (e, root)), ("Reduce", (e, e, MPI.SUM, root)),
                ("Allreduce", (e, e, MPI.SUM)), ("Gather", (e, e, root)), ("Allgather", (e, e)),
                ("Scatter", (e, e, root)), ("Reduce_scatter_block", (e, e, MPI.SUM)),
                ("Reduce_scatter", (e, e, None, MPI.SUM)),
                ("Reduce_scatter", (e, e, [0] * N, MPI.SUM)), ("Alltoall", (e, e)),
                ("Scan", (e, e, MPI.SUM)), ("Exscan", (e, e, MPI.PROD)),
                ("Gatherv", (e, v, root)), ("Scatterv", (v, e, root)), ("Allgatherv", (e, v)),
                ("Alltoallv", (v, v))]
    types = (MPI.INT, MPI.DOUBLE, "i", MPI.FLOAT)
    n = len(calls(None, None))
    for j in range(n + 3):           # every method with one of the forms; Bcast with all four
        f = j % 4
        method, args = calls(NONE_FORMS[f](types[f]), V_NONE_FORMS[f](types[f]))[j % n]
        for comm in (PC, PLAIN):
            getattr(comm, method)(*args)
    # None where mpi4py does not look (the receive buffer off the root) and as MPI.IN_PLACE
    x = data(RANK, C, "float64")
    both("Gather", lambda: ((x, sentinel(N * C, "float64") if RANK == 0 else None, 0),
                            []))
    both("Allreduce", lambda: (lambda r: ((None, r, MPI.SUM), [r]))(data(RANK, C, "int64")))


@pytest.mark.mpi
def test_none_buffer_errors_match_mpi4py():
    """Where mpi4py refuses None, P2PComm does too (on every rank; mpi4py's KeyError for a
    missing datatype is P2PComm's ArgumentTypeError, a TypeError).
    """
    for args, exc in ((([None, 2, MPI.INT], 0), ValueError),     # a count with no buffer
                      (([None, 0], 0), (TypeError, KeyError)),    # no datatype to type it
                      ((None, 0), TypeError)):                    # Bcast has no in-place form
        for comm in (PC, PLAIN):
            with pytest.raises(exc):
                comm.Bcast(*args)
    with pytest.raises(mpicoll.ArgumentError, match="buffer is None but count is 2"):
        PC.Allreduce([None, 2, MPI.INT], [None, 2, MPI.INT], MPI.SUM)


# -- in place ----------------------------------------------------------------------------------

def in_place_cases(kind):
    dt = "int64"
    root = N - 1
    counts = vcounts()
    cases = []

    def reduce_():
        r, v = simple(data(RANK, C, dt), "count", kind)
        if RANK == root:
            return (MPI.IN_PLACE, r, MPI.SUM, root), [v]
        return (r, None, MPI.SUM, root), []
    cases.append(("Reduce", reduce_))

    def allreduce():
        r, v = simple(data(RANK, C, dt), "dt", kind)
        return (MPI.IN_PLACE, r, MPI.SUM), [v]
    cases.append(("Allreduce", allreduce))

    def gather():
        full = sentinel(N * C, dt)
        full[root * C:(root + 1) * C] = data(RANK, C, dt)
        r, v = simple(full, "displ", kind, count=C)
        if RANK == root:
            return (MPI.IN_PLACE, r, root), [v]
        return (data(RANK, C, dt), None, root), []
    cases.append(("Gather", gather))

    def allgather():
        full = sentinel(N * C, dt)
        full[RANK * C:(RANK + 1) * C] = data(RANK, C, dt)
        r, v = simple(full, "count", kind, count=C)
        return (MPI.IN_PLACE, r), [v]
    cases.append(("Allgather", allgather))

    def scatter():
        s, v = simple(data(root, N * C, dt), "dt", kind)
        if RANK == root:
            return (s, MPI.IN_PLACE, root), [v]
        r, w = simple(sentinel(C, dt), "dt", kind)
        return (None, r, root), [w]
    cases.append(("Scatter", scatter))

    def rsb():
        r, v = simple(data(RANK, N * C, dt), "count", kind, count=C)
        return (MPI.IN_PLACE, r, MPI.SUM), [v[:C]]
    cases.append(("Reduce_scatter_block", rsb))

    def rs():
        r, v = simple(data(RANK, sum(counts), dt), "dt", kind)
        return (MPI.IN_PLACE, r, counts, MPI.SUM), [v[:counts[RANK]]]
    cases.append(("Reduce_scatter", rs))

    def alltoall():
        r, v = simple(data(RANK, N * C, dt), "displ4", kind, count=C)
        return (MPI.IN_PLACE, r), [v]
    cases.append(("Alltoall", alltoall))

    def scan():
        r, v = simple(data(RANK, C, dt), "buf", "numpy" if kind == "bytearray" else kind)
        return (None, r, MPI.PROD), [v]              # None is MPI.IN_PLACE for sendbuf
    cases.append(("Scan", scan))

    def exscan():
        r, v = simple(data(RANK, C, dt), "count", kind)
        return (MPI.IN_PLACE, r, MPI.SUM), [v if RANK else v[:0]]
    cases.append(("Exscan", exscan))

    cnt, displs, n = v_layout("four", counts)

    def gatherv():
        full = sentinel(n, dt)
        full[displs[root]:displs[root] + counts[root]] = data(root, counts[root], dt)
        r, v = vspec(full, "four", kind, cnt, displs)
        if RANK == root:
            return (MPI.IN_PLACE, r, root), [v]
        return (data(RANK, counts[RANK], dt), None, root), []
    cases.append(("Gatherv", gatherv))

    def scatterv():
        s, v = vspec(data(root, n, dt), "tuple_dt", kind, cnt, displs)
        if RANK == root:
            return (s, MPI.IN_PLACE, root), [v]
        r, w = simple(sentinel(counts[RANK], dt), "dt", kind)
        return (None, r, root), [w]
    cases.append(("Scatterv", scatterv))

    def allgatherv():
        full = sentinel(n, dt)
        full[displs[RANK]:displs[RANK] + counts[RANK]] = data(RANK, counts[RANK], dt)
        r, v = vspec(full, "tuple_dt", kind, cnt, displs)
        return (MPI.IN_PLACE, r), [v]
    cases.append(("Allgatherv", allgatherv))

    def alltoallv():
        r, v = vspec(data(RANK, C * N, dt), "counts_dt", kind, [C] * N, None)
        return (MPI.IN_PLACE, r), [v]
    cases.append(("Alltoallv", alltoallv))
    return cases


@pytest.mark.mpi
@pytest.mark.parametrize("half", [0, 1])
def test_in_place(half):
    """MPI.IN_PLACE (and None for it) in every method that has it, the kinds rotating."""
    for i, (method, _make) in enumerate(in_place_cases(KINDS[half])):
        if i % 2 == half:
            continue
        kind = KINDS[(i + half) % len(KINDS)]
        both(method, dict(in_place_cases(kind))[method], kind)


# -- nonblocking and persistent faces ------------------------------------------------------------

@pytest.mark.mpi
def test_nonblocking_and_persistent_faces():
    """I... and ..._init take the same forms: DLPack, CAI, [None, dt], counts with displacement."""
    dt = "float64"
    outs = []
    for comm in (PC, PLAIN):
        b = data(0, C, dt) if RANK == 0 else sentinel(C, dt)
        r = sentinel(C, dt)
        g = sentinel(N * C + 1, dt)
        # The send buffers live until Wait, as MPI requires: mpi4py does not keep a
        # CAI-only object alive for a nonblocking call, and Open MPI reads the send buffer
        # after the call returns (a temporary here gave native garbage on Open MPI 5.0).
        s1, s2 = CAIOnly(data(RANK, C, dt)), DLPackOnly(data(RANK, C, dt))
        reqs = [comm.Ibcast(DLPackOnly(b), 0),
                comm.Iallreduce(s1, [r, C, MPI.DOUBLE], MPI.SUM),
                comm.Iallgather([None, MPI.DOUBLE], [None, 0, MPI.DOUBLE]),
                comm.Iallgather(s2, [g, (C, 1), MPI.DOUBLE])]
        for q in reqs:
            q.Wait()
        del s1, s2
        x = data(RANK, C, dt)
        y = sentinel(C, dt)
        p = comm.Allreduce_init(DLPackOnly(x), CAIOnly(y), MPI.SUM)
        got = []
        for step in range(2):
            x[:] = data(RANK + step, C, dt)
            p.Start()
            p.Wait()
            got.append(y.copy())
        p.Free()
        outs.append([b, r, g] + got)
    for a, b in zip(*outs, strict=True):
        assert np.array_equal(a, b)


# -- what cannot be taken -----------------------------------------------------------------------

class FakeCudaDLPack:
    """A DLPack object that says its memory is on a CUDA device."""

    def __dlpack__(self, **kwargs):
        raise AssertionError("not to be read without CuPy")

    def __dlpack_device__(self):
        return (2, 0)


@pytest.mark.mpi
def test_device_dlpack_without_cupy_is_refused_on_every_rank():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed: device DLPack objects take the device path")
    except ImportError:
        pass
    x = np.zeros(C)
    with pytest.raises(mpicoll.ArgumentError, match="kDLCUDA.*needs CuPy") as info:
        PC.Bcast(FakeCudaDLPack() if RANK == N - 1 else x, 0)
    assert info.value.Get_error_class() == MPI.ERR_BUFFER
    assert np.array_equal(x, np.zeros(C))      # nothing was sent
