"""The correctness matrix of the vector collectives and the scans, generated from the registry.

gatherv, scatterv, allgatherv, alltoallv: every algorithm (native included)
x count pattern (all zero, some ranks zero, uneven with one long block, gaps
between displacements, displacements out of rank order) x float64 at every
root (N <= 5, else 3 roots) in place and not, and int32 at one root. scan, exscan:
every algorithm x every reduce case of test_matrix (the non-commutative
AFFINE user op included) x counts x in place / not. Each result is compared,
bitwise, with NumPy computed on the rank and with mpi4py's own call
(``Gatherv``, ...) on the same data; receive gaps must keep their contents.
Then the other faces (nonblocking, persistent, P2PComm) and hostile input,
which must raise on every rank before any message.
"""
import numpy as np
import pytest
from mpi4py import MPI
from refdata import OPS, data, reduce_ref

import mpicoll
from mpicoll import api as vc
from mpicoll import api as vr

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()
PLAIN = comm.Dup()              # mpi4py's own collectives, the reference
DTYPES = ["float64", "int32"]
SENTINEL = 77                   # what receive gaps hold before and after a call

pytestmark = pytest.mark.timeout(300)


def roots():
    return list(range(N)) if N <= 5 else [0, N // 2, N - 1]


def assert_same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got, want)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (
        f"{what}: got {got.reshape(-1)[:12]}... want {want.reshape(-1)[:12]}...")


# -- count patterns ---------------------------------------------------------------

PATTERNS = ["zero", "some_zero", "uneven", "gaps", "reversed"]
LONG = 20000        # one block beyond MPICH's eager limit: rendezvous messages too


def counts_of(pattern):
    if pattern == "zero":
        return [0] * N
    if pattern == "some_zero":
        return [0 if i % 2 == 0 else i + 2 for i in range(N)]
    c = [(3 * i + 1) % 5 for i in range(N)]          # 1 4 2 0 3 1 ...
    if pattern == "uneven":
        c[N // 2] = LONG
    return c


def displs_of(pattern, counts):
    """Displacements: back to back, with gaps before every block, or in reverse rank order."""
    if pattern == "gaps":
        out, at = [], 0
        for i, c in enumerate(counts):
            at += i + 1
            out.append(at)
            at += c
        return out
    if pattern == "reversed":
        out, at = [0] * N, 1
        for i in reversed(range(N)):
            out[i] = at
            at += counts[i] + 1
        return out
    out, at = [], 0
    for c in counts:
        out.append(at)
        at += c
    return out


def extent(counts, displs):
    # two trailing gap elements
    return max([d + c for c, d in zip(counts, displs, strict=True)] + [0]) + 2


def spec(buf, counts, displs, form):
    """One of mpi4py's v-buffer forms describing ``buf`` with these counts and displs."""
    dt = MPI._typedict[buf.dtype.char]
    return {0: [buf, (counts, displs)],
            1: [buf, counts, displs],
            2: [buf, (counts, displs), dt],
            3: [buf, counts, displs, dt]}[form % 4]


def sentinel(n, dt):
    return np.full(n, SENTINEL, dt)


# -- gatherv / scatterv / allgatherv ------------------------------------------------

def gatherv_case(algo, dt, pattern, root, in_place, form):
    counts = counts_of(pattern)
    displs = displs_of(pattern, counts)
    blocks = [data(r, counts[r], dt, salt=1) for r in range(N)]
    n = extent(counts, displs)
    ref = sentinel(n, dt)
    for r in range(N):
        ref[displs[r]:displs[r] + counts[r]] = blocks[r]
    outs = []
    for impl in ("mpicoll", "mpi4py"):
        recv = sentinel(n, dt) if RANK == root else None
        send = blocks[RANK].copy()
        if in_place and RANK == root:
            recv[displs[root]:displs[root] + counts[root]] = blocks[root]
            send = MPI.IN_PLACE
        if impl == "mpicoll":
            res = vc.gatherv(send, spec(recv, counts, displs, form) if RANK == root else None,
                             root, algorithm=algo)
            assert res is recv
            if send is not MPI.IN_PLACE:
                assert_same(send, blocks[RANK], "sendbuf unchanged")
        else:
            PLAIN.Gatherv(send, [recv, (counts, displs)] if RANK == root else None, root)
        outs.append(recv)
    if RANK == root:
        return outs[0], outs[1], ref
    return None


def scatterv_case(algo, dt, pattern, root, in_place, form):
    counts = counts_of(pattern)
    displs = displs_of(pattern, counts)
    full = data(root, extent(counts, displs), dt, salt=2)
    ref = full[displs[RANK]:displs[RANK] + counts[RANK]].copy()
    outs = []
    for impl in ("mpicoll", "mpi4py"):
        send = full.copy() if RANK == root else None
        recv = sentinel(counts[RANK], dt)
        if in_place and RANK == root:
            recv = MPI.IN_PLACE
        if impl == "mpicoll":
            res = vc.scatterv(spec(send, counts, displs, form) if RANK == root else None, recv,
                              root, algorithm=algo)
            assert res is (None if recv is MPI.IN_PLACE else recv)
        else:
            PLAIN.Scatterv([send, (counts, displs)] if RANK == root else None, recv, root)
        if RANK == root:
            assert_same(send, full, "the root's sendbuf is unchanged")
        outs.append(full[displs[RANK]:displs[RANK] + counts[RANK]] if recv is MPI.IN_PLACE
                    else recv)
    return outs[0], outs[1], ref


def allgatherv_case(algo, dt, pattern, in_place, form):
    counts = counts_of(pattern)
    # Each rank its own layout: ranks take the patterns' displacements in turn.
    layouts = ["reversed", "gaps", "packed"] if pattern in ("gaps", "reversed") else ["packed"]
    displs = displs_of(layouts[RANK % len(layouts)], counts)
    blocks = [data(r, counts[r], dt, salt=3) for r in range(N)]
    n = extent(counts, displs)
    ref = sentinel(n, dt)
    for r in range(N):
        ref[displs[r]:displs[r] + counts[r]] = blocks[r]
    outs = []
    for impl in ("mpicoll", "mpi4py"):
        recv = sentinel(n, dt)
        send = blocks[RANK].copy()
        if in_place:
            recv[displs[RANK]:displs[RANK] + counts[RANK]] = blocks[RANK]
            send = MPI.IN_PLACE
        if impl == "mpicoll":
            assert vc.allgatherv(send, spec(recv, counts, displs, form), algorithm=algo) is recv
        else:
            PLAIN.Allgatherv(send, [recv, (counts, displs)])
        outs.append(recv)
    return outs[0], outs[1], ref


# -- alltoallv ----------------------------------------------------------------------

def matrix_of(pattern, symmetric):
    """C[i][j]: elements rank i sends to rank j."""
    if pattern == "zero":
        c = [[0] * N for _ in range(N)]
    elif pattern == "some_zero":
        c = [[0 if i % 2 == 0 or (i + j) % 3 == 0 else i + j + 1 for j in range(N)]
             for i in range(N)]
    else:
        c = [[(3 * i + 5 * j + 1) % 7 for j in range(N)] for i in range(N)]
        if pattern == "uneven":
            c[0][N - 1] = LONG
    if symmetric:        # in place: what a rank sends to j has the size of what j sends it
        c = [[c[min(i, j)][max(i, j)] for j in range(N)] for i in range(N)]
    return c


def alltoallv_case(algo, dt, pattern, in_place, form):
    c = matrix_of(pattern, in_place)
    scounts = c[RANK]
    rcounts = [c[i][RANK] for i in range(N)]
    sdispls = displs_of(pattern, scounts)
    rdispls = displs_of({"gaps": "reversed", "reversed": "gaps"}.get(pattern, pattern), rcounts)
    if in_place:
        sdispls = rdispls = displs_of(pattern, rcounts)
    blocks = {(i, j): data(i * N + j, c[i][j], dt, salt=4) for i in range(N) for j in range(N)}
    rn = extent(rcounts, rdispls)
    ref = sentinel(rn, dt)
    for i in range(N):
        ref[rdispls[i]:rdispls[i] + rcounts[i]] = blocks[(i, RANK)]
    send = sentinel(extent(scounts, sdispls), dt)
    for j in range(N):
        send[sdispls[j]:sdispls[j] + scounts[j]] = blocks[(RANK, j)]
    outs = []
    for impl in ("mpicoll", "mpi4py"):
        if in_place:
            recv, s = send.copy(), MPI.IN_PLACE
        else:
            recv, s = sentinel(rn, dt), send.copy()
        if impl == "mpicoll":
            ss = s if in_place else spec(s, scounts, sdispls, form + 1)
            assert vc.alltoallv(ss, spec(recv, rcounts, rdispls, form), algorithm=algo) is recv
            if not in_place:
                assert_same(s, send, "sendbuf unchanged")
        else:
            PLAIN.Alltoallv(s if in_place else [s, (scounts, sdispls)],
                            [recv, (rcounts, rdispls)])
        outs.append(recv)
    return outs[0], outs[1], ref


# -- scan / exscan ------------------------------------------------------------------

REDUCE_CASES = [
    ("float64", "SUM"), ("int32", "SUM"),
    ("int32", "PROD"), ("int32", "MIN"), ("int32", "MAX"), ("int32", "LAND"),
    ("int32", "LOR"), ("int32", "LXOR"), ("int32", "BAND"), ("int32", "BOR"),
    ("int32", "BXOR"), ("uint8", "SUM"), ("uint8", "BXOR"), ("int64", "PROD"),
    ("float32", "MIN"), ("float64", "MAX"), ("float64", "PROD"),
    ("complex128", "SUM"), ("complex64", "PROD"), ("bool", "LAND"), ("bool", "LOR"),
    ("bool", "LXOR"), ("float64", "USER_ADD"), ("complex128", "AFFINE"),
]


def scan_case(primitive, algo, dt, opname, c, in_place):
    op = OPS[opname]
    every = [data(r, c, dt, opname) for r in range(N)]
    hi = RANK + 1 if primitive == "scan" else RANK
    untouched = data(RANK, c, dt, opname, salt=6)      # exscan's rank 0 keeps this
    ref = reduce_ref(every[:hi], opname, dt) if hi else untouched
    fn = getattr(vc, primitive)
    outs = []
    for impl in ("mpicoll", "mpi4py"):
        recv = untouched.copy()
        send = every[RANK].copy()
        if in_place:
            recv[...] = send
            send = MPI.IN_PLACE
        if impl == "mpicoll":
            assert fn(send, recv, op, algorithm=algo) is recv
            if send is not MPI.IN_PLACE:
                assert_same(send, every[RANK], "sendbuf unchanged")
        else:
            getattr(PLAIN, primitive.capitalize())(send, recv, op)
        outs.append(recv)
    if primitive == "exscan" and RANK == 0:
        # MPI leaves it undefined; mpicoll leaves it as it was (in place: the input).
        want = every[0] if in_place else untouched
        assert_same(outs[0], want, "exscan on rank 0 leaves recvbuf alone")
        return None
    return outs[0], outs[1], ref.astype(dt)


# -- the matrix ---------------------------------------------------------------------

V = ("gatherv", "scatterv", "allgatherv", "alltoallv")


def cases():
    return [(p, a) for p in V + ("scan", "exscan") for a in mpicoll.algorithms(p)]


@pytest.mark.mpi
@pytest.mark.parametrize("primitive,algo", cases())
def test_vmatrix(primitive, algo):
    ncalls = 0
    form = 0
    if primitive in V:
        for dt in DTYPES:
            for pattern in PATTERNS:
                rs = roots() if primitive in ("gatherv", "scatterv") else [None]
                if dt != "float64":
                    rs = rs[-1:]                # the second dtype: one root, not in place,
                for root in rs:                 # which keeps the runtime down
                    for in_place in ((False, True) if dt == "float64" else (False,)):
                        form += 1
                        what = (f"{primitive}/{algo} N={N} dtype={dt} pattern={pattern} "
                                f"root={root} in_place={in_place} rank={RANK}")
                        if primitive == "gatherv":
                            res = gatherv_case(algo, dt, pattern, root, in_place, form)
                        elif primitive == "scatterv":
                            res = scatterv_case(algo, dt, pattern, root, in_place, form)
                        elif primitive == "allgatherv":
                            res = allgatherv_case(algo, dt, pattern, in_place, form)
                        else:
                            res = alltoallv_case(algo, dt, pattern, in_place, form)
                        if res is not None:
                            got, native, ref = res
                            assert_same(got, ref, what + " vs NumPy")
                            assert_same(got, native, what + " vs mpi4py")
                        ncalls += 1
    else:
        fn = mpicoll.algorithm_info(primitive, algo)
        assert not fn.commutative_only, "every scan keeps rank order"
        for k, (dt, opname) in enumerate(REDUCE_CASES):
            for c in ((0, 1, 2 * N + 1, 1003) if k < 2 else (2 * N + 1,)):
                for in_place in ((False, True) if k == 0 or opname == "AFFINE" else (False,)):
                    what = (f"{primitive}/{algo} N={N} dtype={dt} op={opname} count={c} "
                            f"in_place={in_place} rank={RANK}")
                    res = scan_case(primitive, algo, dt, opname, c, in_place)
                    if res is not None:
                        got, native, ref = res
                        assert_same(got, ref, what + " vs NumPy")
                        assert_same(got, native, what + " vs mpi4py")
                    ncalls += 1
    assert ncalls > 0


@pytest.mark.mpi
def test_scatterv_overlapping_send_blocks():
    """Send blocks may overlap (only receive blocks may not): every rank gets the same slice."""
    full = np.arange(10.0)
    for algo in mpicoll.algorithms("scatterv"):
        out = np.empty(4)
        vc.scatterv([full, [4] * N, [2] * N] if RANK == 0 else None, out, 0, algorithm=algo)
        assert_same(out, full[2:6], algo)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("face", ["blocking", "nonblocking"])
def test_native_alltoallv_is_called_by_a_rank_with_nothing_to_move(monkeypatch, face):
    """The last rank sends and receives nothing, the others exchange: MPI requires every
    rank to make the collective call, so ``native`` must call ``MPI_Alltoallv`` there
    too (the hand-written algorithms may leave it out: they skip empty blocks on both
    sides). Results against mpi4py's own call.
    """
    import mpicoll.coll.alltoallv as impl
    calls = []
    real = impl.native

    def spy(ctx, name, *args, **kwargs):
        calls.append(name)
        return real(ctx, name, *args, **kwargs)
    monkeypatch.setattr(impl, "native", spy)
    last = N - 1
    counts = [0 if last in (RANK, j) else 1 for j in range(N)]
    spec = list(range(N))
    x = np.arange(N, dtype=float) + 10 * RANK
    got, want = np.full(N, -1.0), np.full(N, -1.0)
    if face == "blocking":
        vc.alltoallv([x, (counts, spec)], [got, (counts, spec)], algorithm="native")
    else:
        vr.ialltoallv([x, (counts, spec)], [got, (counts, spec)], algorithm="native").Wait()
    PLAIN.Alltoallv([x, (counts, spec)], [want, (counts, spec)])
    assert calls == ["Alltoallv"], f"rank {RANK}: {calls}"
    assert_same(got, want, "alltoallv native")
    for algo in mpicoll.algorithms("alltoallv"):      # and every algorithm agrees
        got[...] = -1
        vc.alltoallv([x, (counts, spec)], [got, (counts, spec)], algorithm=algo)
        assert_same(got, want, f"alltoallv {algo}")


@pytest.mark.mpi
def test_forms_and_allocation():
    """Plain buffers split like mpi4py; integer counts and strides; None allocates."""
    k = 2 * N + 1                                       # not a multiple of N
    x = data(RANK, [(k // N) + (k % N > i) for i in range(N)][RANK], "float64")
    every = np.concatenate([data(r, [(k // N) + (k % N > i) for i in range(N)][r], "float64")
                            for r in range(N)])
    for algo in mpicoll.algorithms("allgatherv"):
        out = np.empty(k)
        vc.allgatherv(x, out, algorithm=algo)            # plain: mpi4py's even split
        assert_same(out, every, f"plain {algo}")
        assert_same(vc.allgatherv(x, algorithm=algo), every, f"allocated {algo}")
    got = vc.gatherv(x, None, N - 1)
    assert_same(got if RANK == N - 1 else every, every, "gatherv allocates on the root")
    y = np.full(3, RANK, np.int32)
    out = np.full(5 * N, -1, np.int32)
    vc.allgatherv(y, [out, 3, 5])                        # count 3 each, stride 5
    want = np.full(5 * N, -1, np.int32)
    for r in range(N):
        want[5 * r:5 * r + 3] = r
    assert_same(out, want, "integer count and stride")
    out8 = np.zeros(3 * N * 4, np.uint8)                # an int32 view through the datatype
    vc.allgatherv(y, [out8, [3] * N, "i"])
    assert_same(out8.view(np.int32), np.repeat(np.arange(N, dtype=np.int32), 3), "datatype code")


# -- the other faces ----------------------------------------------------------------

def _face_calls(face):
    """(primitive, thunk returning the result, reference) for one uneven case of each."""
    counts = counts_of("gaps")
    displs = displs_of("gaps", counts)
    n = extent(counts, displs)
    blocks = [data(r, counts[r], "float64") for r in range(N)]
    ref = sentinel(n, "float64")
    for r in range(N):
        ref[displs[r]:displs[r] + counts[r]] = blocks[r]
    x = data(RANK, 7, "complex128", "AFFINE")
    out = []
    for root in (0, N - 1):
        recv = sentinel(n, "float64") if RANK == root else None
        spec = [recv, (counts, displs)] if recv is not None else None
        out.append(("gatherv", face("gatherv")(blocks[RANK], spec, root),
                    ref if RANK == root else None, recv))
    recv = np.empty(counts[RANK])
    spec = [ref, (counts, displs)] if RANK == 0 else None
    out.append(("scatterv", face("scatterv")(spec, recv, 0), blocks[RANK], recv))
    recv = sentinel(n, "float64")
    out.append(("allgatherv", face("allgatherv")(blocks[RANK], [recv, counts, displs]), ref, recv))
    recv = np.empty(N)
    out.append(("alltoallv",
                face("alltoallv")([np.arange(N) + 10.0 * RANK, [1] * N], [recv, [1] * N]),
                np.arange(N) * 10.0 + RANK, recv))
    every = [data(r, 7, "complex128", "AFFINE") for r in range(N)]
    recv = np.empty(7, complex)
    out.append(("scan", face("scan")(x, recv, OPS["AFFINE"]),
                reduce_ref(every[:RANK + 1], "AFFINE", "complex128"), recv))
    recv = np.zeros(7, complex)
    out.append(("exscan", face("exscan")(x, recv, OPS["AFFINE"]),
                reduce_ref(every[:RANK], "AFFINE", "complex128") if RANK else np.zeros(7, complex),
                recv))
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["nonblocking", "persistent"])
def test_request_faces(kind):
    def face(name):
        if kind == "nonblocking":
            return getattr(vr, "i" + name)

        def persistent(*a, **k):
            req = getattr(vr, name + "_init")(*a, **k)
            req.Start()
            return req
        return persistent
    calls = _face_calls(face)
    mpicoll.waitall([req for _, req, _, _ in calls])
    for prim, req, ref, recv in calls:
        if ref is not None:
            assert_same(recv, ref, f"{kind} {prim}")
        if kind == "persistent":
            req.Free()


VComm = mpicoll.P2PComm


@pytest.mark.mpi
@pytest.mark.parametrize("column", [0, 1, 2])
def test_p2pcomm_methods_match_mpi4py(column):
    """Every v method of P2PComm, per algorithm column, against the plain communicator."""
    choices = {p: [a for a in mpicoll.algorithms(p) if a != "native"]
               for p in V + ("scan", "exscan")}
    pc = VComm(comm, **{p: names[column % len(names)] for p, names in choices.items()})
    counts = counts_of("reversed")
    displs = displs_of("reversed", counts)
    n = extent(counts, displs)
    x = data(RANK, counts[RANK], "float64")
    outs = []
    for c in (pc, PLAIN):
        g = sentinel(n, "float64")
        c.Gatherv(x, [g, (counts, displs), MPI.DOUBLE], N - 1)
        s = sentinel(counts[RANK], "float64")
        c.Scatterv([np.arange(float(n)), counts, displs, MPI.DOUBLE] if RANK == 0 else None, s, 0)
        a = sentinel(n, "float64")
        c.Allgatherv([x, MPI.DOUBLE], [a, (counts, displs), MPI.DOUBLE])
        t = bytearray(8 * N)                           # any buffer, typed by the spec
        c.Alltoallv([np.arange(N, dtype=np.float64) + RANK, [1] * N], [t, [1] * N, MPI.DOUBLE])
        q = np.empty(5, np.int64)
        c.Scan(np.arange(5) + RANK, q, MPI.SUM)
        e = np.full(5, -1, np.int64)
        c.Exscan(np.arange(5) * (RANK + 1), e, MPI.PROD)
        req = c.Iallgatherv(x, [a, (counts, displs)])
        req.Wait()
        outs.append([g, s, a, np.frombuffer(t), q, e if RANK else np.zeros(0, np.int64)])
    for mine, theirs in zip(*outs, strict=True):
        assert_same(mine, theirs, "P2PComm vs mpi4py")


# -- device arrays (the CPU stand-in of test_device.py) --------------------------------

@pytest.mark.mpi
@pytest.mark.parametrize("aware", [False, True], ids=["fake-staged", "fake-aware"])
def test_fake_device_arrays(aware):
    """Every algorithm, native included, on device arrays: hand-written ones through the
    transports, native ones through host copies where the library cannot take them.
    """
    import fakedevice as fd

    from mpicoll.device import arrays as _device
    fd.install()
    _device.set_cuda_aware(aware)
    dev, host = fd.to_device, fd.to_host
    counts = counts_of("gaps")
    displs = displs_of("reversed", counts)
    n = extent(counts, displs)
    blocks = [data(r, counts[r], "float64") for r in range(N)]
    placed = sentinel(n, "float64")
    for r in range(N):
        placed[displs[r]:displs[r] + counts[r]] = blocks[r]
    every = [data(r, 7, "complex128", "AFFINE") for r in range(N)]
    try:
        for prim in V + ("scan", "exscan"):
            for algo in mpicoll.algorithms(prim):
                what = f"{prim}/{algo} aware={aware}"
                if prim == "gatherv":
                    r = dev(sentinel(n, "float64")) if RANK == N - 1 else None
                    vc.gatherv(dev(blocks[RANK]), [r, (counts, displs)] if r is not None else None,
                               N - 1, algorithm=algo)
                    got, ref = (host(r), placed) if r is not None else (None, None)
                elif prim == "scatterv":
                    r = dev(sentinel(counts[RANK], "float64"))
                    vc.scatterv([dev(placed), (counts, displs)] if RANK == 0 else None, r, 0,
                                algorithm=algo)
                    got, ref = host(r), blocks[RANK]
                elif prim == "allgatherv":
                    r = dev(sentinel(n, "float64"))
                    vc.allgatherv(dev(blocks[RANK]), [r, counts, displs], algorithm=algo)
                    got, ref = host(r), placed
                elif prim == "alltoallv":
                    r = dev(np.empty(N))
                    vc.alltoallv([dev(np.arange(N) + 10.0 * RANK), [1] * N], [r, [1] * N],
                                 algorithm=algo)
                    got, ref = host(r), np.arange(N) * 10.0 + RANK
                else:
                    r = dev(np.zeros(7, complex))
                    getattr(vc, prim)(dev(every[RANK]), r, OPS["AFFINE"], algorithm=algo)
                    hi = RANK + 1 if prim == "scan" else RANK
                    got = host(r)
                    ref = (reduce_ref(every[:hi], "AFFINE", "complex128") if hi
                           else np.zeros(7, complex))
                if ref is not None:
                    assert_same(got, ref, what)
    finally:
        _device.set_cuda_aware(None)


# -- hostile input ------------------------------------------------------------------

def raises_everywhere(fn, match):
    """Every rank raises ArgumentError (the bad rank its own message), and nothing was sent."""
    err = None
    try:
        fn()
    except mpicoll.ArgumentError as exc:
        err = str(exc)
    every = comm.allgather(err)
    assert all(e is not None for e in every), every
    assert any(match in e for e in every), (match, every)
    # The communicator still works and no message of the failed call is left over.
    x = np.full(RANK % 3, RANK, np.int32)
    got = vc.allgatherv(x, algorithm="ring")
    assert_same(got, np.concatenate([np.full(r % 3, r, np.int32) for r in range(N)]), "after")


def bad_on(rank, bad, good):
    return bad if RANK == rank else good


#: name -> (call, text the error must contain on some rank[, the fewest ranks it needs]).
HOSTILE = {
    "wrong_number_of_counts": (
        lambda: vc.gatherv(np.ones(1), [np.zeros(N + 1), [1] * (N + 1)] if RANK == 0 else None, 0),
        f"expected {N} counts (one per rank); got {N + 1}"),
    "negative_count": (
        lambda: vc.allgatherv(np.ones(1), [np.zeros(N), [1] * (N - 1) + [-1]]),
        "expected a non-negative count; got -1"),
    "count_not_an_integer": (
        lambda: vc.allgatherv(np.ones(1), [np.zeros(N), [1.5] * N]),
        "expected a non-negative integer count"),
    "block_beyond_the_buffer": (
        lambda: vc.gatherv(np.ones(2), [np.zeros(2 * N - 1), [2] * N] if RANK == 0 else None, 0),
        "beyond the buffer's"),
    "overlapping_receive_blocks": (
        lambda: vc.allgatherv(np.ones(2), [np.zeros(2 * N + 1), [2] * N,
                                           [0] + list(range(1, 2 * N, 2))[:N - 1]]),
        "MPI forbids overlapping receive blocks", 2),
    "root_counts_do_not_match_a_sendbuf": (
        lambda: vc.gatherv(np.ones(bad_on(N - 1, 3, 2)),
                           [np.zeros(2 * N), [2] * N] if RANK == 0 else None, 0),
        f"recvbuf counts[{N - 1}] = 2 but rank {N - 1} sends 3"),
    "scatterv_recvbuf_size_mismatch": (
        lambda: vc.scatterv([np.zeros(2 * N), [2] * N] if RANK == 0 else None,
                            np.empty(bad_on(N - 1, 1, 2)), 0),
        f"sendbuf counts[{N - 1}] = 2 but rank {N - 1} receives 1"),
    "allgatherv_sendbuf_mismatch": (
        lambda: vc.allgatherv(np.ones(bad_on(N - 1, 1, 2)), [np.zeros(2 * N), [2] * N]),
        "do not match the ranks' buffers"),
    "alltoallv_counts_disagree_between_ranks": (
        # The last rank expects 3 elements from rank 0, which sends it 2: no rank can see
        # that alone.
        lambda: vc.alltoallv([np.ones(2 * N), [2] * N],
                             [np.zeros(3 * N), bad_on(N - 1, [3] + [2] * (N - 1), [2] * N)]),
        "do not match between ranks", 2),
    "alltoallv_overlapping_receive": (
        lambda: vc.alltoallv([np.ones(N), [1] * N], [np.zeros(N), [1] * N, [0] * N]),
        "MPI forbids overlapping receive blocks", 2),
    "in_place_off_the_root": (
        lambda: vc.gatherv(MPI.IN_PLACE if RANK == N - 1 else np.ones(1),
                           [np.zeros(N), [1] * N] if RANK == 0 else None, 0),
        "MPI.IN_PLACE is only valid on the root", 2),
    "alltoallv_without_recvbuf": (
        lambda: vc.alltoallv([np.ones(N), [1] * N], None),
        "alltoallv cannot allocate"),
    "bad_root": (lambda: vc.scatterv(None, np.empty(1), N), "expected a rank in"),
    "vspec_of_five_items": (
        lambda: vc.allgatherv(np.ones(1), [np.zeros(N), [1] * N, None, None, None]),
        "got a list of 5 items"),
    "scan_op_for_dtype": (lambda: vc.scan(np.ones(3), None, MPI.BAND), "MPI.BAND is defined for"),
    "exscan_recvbuf_too_small": (lambda: vc.exscan(np.ones(3), np.zeros(bad_on(0, 2, 3))),
                                 "expected 3 elements"),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile(name):
    fn, match, *min_size = HOSTILE[name]
    if N < (min_size or [1])[0]:
        pytest.skip(f"needs {min_size[0]} ranks")
    raises_everywhere(fn, match)
