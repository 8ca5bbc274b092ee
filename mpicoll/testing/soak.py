"""Soak: thousands of random collective calls, each compared with the native MPI one.

::

    mpiexec -n 4 python -m mpicoll.testing.soak --calls 10000 --seed 1
    mpiexec -n 4 python -m mpicoll.testing.soak --calls 10000 --check     # in checked mode
    mpiexec -n 4 python -m mpicoll.testing.soak --calls 10000 --prefer shm  # the shm algorithms

Each call draws (the same on every rank) a primitive, one of its algorithms
(``native`` and ``auto`` included), a dtype, a count (0 to ``--max-count``,
log-uniform), a root, an op valid for the dtype (built-ins and a commutative
user op), in-place or not. Around every call the ranks exchange user
point-to-point traffic on the *same* communicator: a posted
``Irecv(ANY_SOURCE, ANY_TAG)`` and an ``Isend`` to the next rank stay
pending across the collective and are checked after it (mpicoll's own
messages must never match them). The mpicoll result is compared bitwise
with the native collective (mpi4py on the user communicator) on data chosen
so that every order of reduction gives the same bits; the caller's input
must be unchanged.

Counted and reported: mismatches, requests left active by mpicoll calls
(every request the algorithms create is tracked), stray messages left on the
private or user communicator, communicators (the private communicator must be
one and the same object throughout; a probe ``Dup`` handle must not move),
and resident memory (sampled; growth after the first tenth of the run).
Exits 0 only when all of them are clean.
"""
import argparse
import json
import math
import os
import time

import numpy as np
from mpi4py import MPI

__all__ = ["soak", "main"]

DTYPES = ["float64", "float32", "int32", "int64", "int16", "uint8", "uint32", "complex128", "bool"]
REDUCING = ("reduce", "allreduce", "reduce_scatter", "scan", "exscan")
_VALID = {"SUM": "iufc", "PROD": "iufc", "MIN": "iuf", "MAX": "iuf", "LAND": "iub",
          "LOR": "iub", "LXOR": "iub", "BAND": "iu", "BOR": "iu", "BXOR": "iu", "USER_ADD": "iufc"}


def _user_add(invec, inoutvec, datatype):
    from mpi4py.util import dtlib
    dt = dtlib.to_numpy_dtype(datatype)
    b = np.frombuffer(inoutvec, dtype=dt)
    b += np.frombuffer(invec, dtype=dt)


_OPS = {}


def _op(name):
    if not _OPS:
        for n in _VALID:
            _OPS[n] = (MPI.Op.Create(_user_add, commute=True) if n == "USER_ADD"
                       else getattr(MPI, n))
    return _OPS[name]


def _data(rng, count, dtype, opname):
    """Values whose reduction is exact in every order (so results compare bitwise)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, count).astype(bool)
    if opname == "PROD":
        vals = rng.integers(1, 3, count)          # 1 or 2: at most 2^N, exact
    elif opname in ("BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR"):
        vals = rng.integers(0, 4 if opname[0] == "L" else 128, count)
    else:
        vals = rng.integers(0 if dt.kind == "u" else -8, 9, count)
    out = vals.astype(dt)
    if dt.kind == "c":
        out = (vals + 1j * (rng.integers(-4, 5, count) if opname != "PROD" else 0)).astype(dt)
    return out


def _draw(rng, size, max_count, layout=None, prefer=None):
    """One random case, the same on every rank.

    ``layout``: the communicator's nodes (the algorithms that cannot run on them -- the
    shm ones across nodes -- are not drawn); ``prefer``: the algorithm taken wherever the
    drawn primitive has one by that name.
    """
    import mpicoll

    def runs(fn, commutative):
        check = getattr(fn, "check_layout", None)
        return layout is None or check is None or check(layout, commutative) is None
    prim = mpicoll.PRIMITIVES[rng.integers(len(mpicoll.PRIMITIVES))]
    names = [a for a in mpicoll.algorithms(prim)
             if runs(mpicoll.algorithm_info(prim, a), True)] + ["auto"]
    algo = names[rng.integers(len(names))]
    if prefer in names:
        algo = prefer
    dtype = DTYPES[rng.integers(len(DTYPES))]
    kind = np.dtype(dtype).kind
    opname = None
    if prim in REDUCING:
        fn = None if algo == "auto" else mpicoll.algorithm_info(prim, algo)
        ops = [o for o, kinds in _VALID.items() if kind in kinds]
        if fn is not None and (fn.commutative_only or not runs(fn, False)):
            ops = [o for o in ops if _op(o).is_commutative]
        opname = ops[rng.integers(len(ops))]
    r = rng.random()
    if r < 0.05:
        count = 0
    elif r < 0.15:
        count = int(rng.integers(1, size + 2))
    else:
        count = int(math.exp(rng.uniform(0, math.log(max(max_count, 2)))))
    return dict(primitive=prim, algorithm=algo, dtype=dtype, op=opname, count=count,
                root=int(rng.integers(size)), in_place=bool(rng.random() < 0.3))


def _one(comm, case, rng, rank, size):
    """Run one case with mpicoll and natively; return (ok, detail)."""
    import mpicoll
    prim, algo, dt, opname, c, root, inpl = (case[k] for k in (
        "primitive", "algorithm", "dtype", "op", "count", "root", "in_place"))
    op = _op(opname) if opname else None
    kw = dict(comm=comm, algorithm=algo)
    mine = _data(np.random.default_rng([*rng, rank]), c, dt, opname or "SUM")
    keep = mine.copy()
    if prim == "bcast":
        got = mpicoll.bcast(mine.copy() if rank == root else np.zeros(c, dt), root, **kw)
        want = mine.copy()
        comm.Bcast(want, root)
    elif prim == "reduce":
        if inpl and rank == root:
            got = mpicoll.reduce(MPI.IN_PLACE, mine.copy(), op, root, **kw)
        else:
            got = mpicoll.reduce(mine, None, op, root, **kw)
        want = np.empty(c, dt) if rank == root else None
        comm.Reduce(mine, want, op, root)
        if rank != root:
            if got is not None:
                return False, "reduce returned a value off the root"
            got = want = np.zeros(0, dt)
    elif prim == "allreduce":
        got = (mpicoll.allreduce(MPI.IN_PLACE, mine.copy(), op, **kw) if inpl
               else mpicoll.allreduce(mine, None, op, **kw))
        want = np.empty(c, dt)
        comm.Allreduce(mine, want, op)
    elif prim == "gather":
        if inpl and rank == root:
            buf = np.zeros((size, c), dt)
            buf[root] = mine
            got = mpicoll.gather(MPI.IN_PLACE, buf, root, **kw)
        else:
            got = mpicoll.gather(mine, None, root, **kw)
        want = np.empty((size, c), dt) if rank == root else None
        comm.Gather(mine, want, root)
        if rank != root:
            if got is not None:
                return False, "gather returned a value off the root"
            got = want = np.zeros(0, dt)
    elif prim == "allgather":
        if inpl:
            buf = np.zeros((size, c), dt)
            buf[rank] = mine
            got = mpicoll.allgather(MPI.IN_PLACE, buf, **kw)
        else:
            got = mpicoll.allgather(mine, None, **kw)
        want = np.empty((size, c), dt)
        comm.Allgather(mine, want)
    elif prim == "scatter":
        full = _data(np.random.default_rng([*rng, root, 7]), size * c, dt, "SUM")
        send = full.copy() if rank == root else None
        if inpl and rank == root:
            res = mpicoll.scatter(send, MPI.IN_PLACE, root, **kw)
            got = None if res is not None else send[root * c:(root + 1) * c].copy()
            if not np.array_equal(send, full):
                return False, "scatter modified the root's sendbuf"
        else:
            got = mpicoll.scatter(send, np.empty(c, dt), root, **kw)
        want = np.empty(c, dt)
        comm.Scatter(full if rank == root else None, want, root)
        if got is None:
            return False, "scatter in place returned a value on the root"
    elif prim == "reduce_scatter":
        counts = [int(x) for x in np.random.default_rng([*rng, size, 3]).integers(0, c + 1, size)]
        if inpl:
            counts = [c] * size
        full = _data(np.random.default_rng([*rng, rank, 5]), sum(counts), dt, opname)
        keep_full = full.copy()
        if inpl:
            got = mpicoll.reduce_scatter(MPI.IN_PLACE, full.copy(), counts, op, **kw)
            got = got[:counts[rank]]
        elif counts == [c] * size and case["root"] % 2 == 0:
            got = mpicoll.reduce_scatter_block(full, None, op, **kw)
        else:
            got = mpicoll.reduce_scatter(full, None, counts, op, **kw)
        want = np.empty(counts[rank], dt)
        comm.Reduce_scatter(full, want, counts, op)
        if not np.array_equal(full, keep_full):
            return False, "reduce_scatter modified sendbuf"
    elif prim == "alltoall":
        send = _data(np.random.default_rng([*rng, rank, 11]), size * c, dt, "SUM")
        keep_send = send.copy()
        got = (mpicoll.alltoall(MPI.IN_PLACE, send.copy(), **kw) if inpl
               else mpicoll.alltoall(send, None, **kw))
        want = np.empty(size * c, dt)
        comm.Alltoall(send, want)
        if not np.array_equal(send, keep_send):
            return False, "alltoall modified sendbuf"
        got = got.reshape(-1)
    elif prim == "barrier":
        mpicoll.barrier(**kw)
        comm.Barrier()
        got = want = np.zeros(0)
    elif prim in ("gatherv", "scatterv", "allgatherv", "alltoallv", "scan", "exscan"):
        res = _one_v(comm, case, rng, rank, size, mine, kw)
        if isinstance(res, str):
            return False, res
        got, want = res
    else:
        raise AssertionError(prim)
    if not np.array_equal(mine, keep):
        return False, "the caller's input was modified"
    got = np.asarray(got).reshape(-1)
    want = np.asarray(want).reshape(-1)
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(
            got.view(np.uint8), want.view(np.uint8)):
        return False, f"result differs from native: got {got[:6]} want {want[:6]}"
    return True, ""


def _layout(rng, size, c):
    """Per-rank counts in [0, c] and displacements with random gaps (the same on every rank)."""
    counts = [int(x) for x in rng.integers(0, c + 1, size)]
    gaps = [int(x) for x in rng.integers(0, 3, size)]
    displs, at = [], 0
    for k, g in zip(counts, gaps, strict=True):
        displs.append(at + g)
        at += g + k
    return counts, displs, at


def _one_v(comm, case, rng, rank, size, mine, kw):
    """The vector collectives and the scans: (got, want), or the text of a failure."""
    from .. import api as vc
    prim, dt, opname, c, root, inpl = (case[k] for k in (
        "primitive", "dtype", "op", "count", "root", "in_place"))
    counts, displs, n = _layout(np.random.default_rng([*rng, size, 13]), size, c)
    block = _data(np.random.default_rng([*rng, rank, 17]), counts[rank], dt, "SUM")
    if prim == "gatherv":
        want = np.zeros(n, dt) if rank == root else None
        comm.Gatherv(block, [want, (counts, displs)] if rank == root else None, root)
        got = np.zeros(n, dt) if rank == root else None
        send = block
        if inpl and rank == root:
            got[displs[root]:displs[root] + counts[root]] = block
            send = MPI.IN_PLACE
        res = vc.gatherv(send, [got, (counts, displs)] if rank == root else None, root, **kw)
        if res is not got:
            return "gatherv returned something else than recvbuf (root) or None"
        if rank != root:
            got = want = np.zeros(0, dt)
    elif prim == "scatterv":
        full = _data(np.random.default_rng([*rng, root, 19]), n, dt, "SUM")
        keep_full = full.copy()
        want = np.empty(counts[rank], dt)
        comm.Scatterv([full, (counts, displs)] if rank == root else None, want, root)
        if inpl and rank == root:
            if vc.scatterv([full, (counts, displs)], MPI.IN_PLACE, root, **kw) is not None:
                return "scatterv in place returned a value on the root"
            got = full[displs[root]:displs[root] + counts[root]].copy()
        else:
            got = vc.scatterv([full, (counts, displs)] if rank == root else None,
                              np.empty(counts[rank], dt), root, **kw)
        if not np.array_equal(full, keep_full):
            return "scatterv modified the root's sendbuf"
    elif prim == "allgatherv":
        want = np.zeros(n, dt)
        comm.Allgatherv(block, [want, (counts, displs)])
        got = np.zeros(n, dt)
        send = block
        if inpl:
            got[displs[rank]:displs[rank] + counts[rank]] = block
            send = MPI.IN_PLACE
        vc.allgatherv(send, [got, (counts, displs)], **kw)
    elif prim == "alltoallv":
        # counts[(i + j) % size] from rank i to rank j: symmetric, so in place works too.
        sc = [counts[(rank + j) % size] for j in range(size)]
        sd = [int(x) for x in np.cumsum([0] + sc[:-1])]
        send = _data(np.random.default_rng([*rng, rank, 23]), sum(sc), dt, "SUM")
        keep_send = send.copy()
        want = np.zeros(sum(sc), dt)
        comm.Alltoallv([send, (sc, sd)], [want, (sc, sd)])
        if inpl:
            got = vc.alltoallv(MPI.IN_PLACE, [send.copy(), (sc, sd)], **kw)
        else:
            got = vc.alltoallv([send, (sc, sd)], [np.zeros(sum(sc), dt), (sc, sd)], **kw)
        if not np.array_equal(send, keep_send):
            return "alltoallv modified sendbuf"
    else:
        op = _op(opname)
        fn, native = (vc.scan, comm.Scan) if prim == "scan" else (vc.exscan, comm.Exscan)
        want = np.zeros(c, dt)
        native(mine, want, op)
        got = (fn(MPI.IN_PLACE, mine.copy(), op, **kw) if inpl
               else fn(mine, np.zeros(c, dt), op, **kw))
        if prim == "exscan" and rank == 0:
            got = want = np.zeros(0, dt)        # undefined on rank 0
    return got, want


def _rss():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - not Linux
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _Tracker:
    """Counts every request and communicator the algorithms touch (via Ctx)."""

    def __init__(self):
        from ..engine import context as _context
        self.ctx_cls = _context.Ctx
        self.requests = []
        self.created = 0
        self.comms = {}
        self.saved = {}

    def __enter__(self):
        cls, tracker = self.ctx_cls, self
        for name in ("isend", "irecv"):
            orig = getattr(cls, name)
            self.saved[name] = orig

            def wrapped(ctx, buf, peer, _orig=orig):
                req = _orig(ctx, buf, peer)
                tracker.requests.append(req)
                tracker.created += 1
                return req
            setattr(cls, name, wrapped)
        orig_init = cls.__init__
        self.saved["__init__"] = orig_init

        def init(ctx, comm, *a, **k):
            tracker.comms[id(comm)] = comm
            orig_init(ctx, comm, *a, **k)
        cls.__init__ = init
        return self

    def __exit__(self, *exc):
        for name, fn in self.saved.items():
            setattr(self.ctx_cls, name, fn)

    def leaked(self):
        """Requests still active after the call; forgets the finished ones."""
        left = [r for r in self.requests if r != MPI.REQUEST_NULL]
        self.requests.clear()
        for r in left:          # retire them so one leak is counted once, not forever
            r.Cancel()
            for _ in range(1000):
                if r.Test():
                    break
                time.sleep(1e-4)
            else:
                r.Free()
        return len(left)


def _stray(comm):
    status = MPI.Status()
    n = 0
    while comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status):
        scratch = bytearray(max(1, status.Get_count(MPI.BYTE)))
        comm.Recv([scratch, MPI.BYTE], status.Get_source(), status.Get_tag())
        n += 1
    return n


def soak(comm=None, calls=10000, seed=1, max_count=20000, p2p=True, check=None,
         progress=None, max_errors=10, prefer=None):
    """Run the soak on ``comm`` (default COMM_WORLD); return the summary dict (same on every rank).

    ``prefer``: an algorithm name run wherever the drawn primitive has it (``"shm"``: the
    shared-memory algorithms on every call of a primitive that has one).
    ``check``: None (leave the mode alone) or a mode for :func:`mpicoll.engine.call.set_check`.
    ``progress``: called as ``progress(i, summary_so_far)`` on rank 0 every tenth of the run.
    """
    from ..core.topology import layout
    from ..device.peer_memory import node_shm
    from ..device.peer_memory import stats as shm_stats
    from ..engine.call import set_check
    from ..engine.context import private_comm
    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    old_mode = set_check(comm, check) if check is not None else None
    pcomm = private_comm(comm)
    node_layout = layout(pcomm)
    errors, mismatches, leaked, p2p_bad, preferred = [], 0, 0, 0, 0
    by_prim = {}
    rss = []
    every = max(1, calls // 10)
    started = time.perf_counter()
    # Warm-up: first use of the native collectives may allocate (MPICH's lazy setup).
    import mpicoll
    mpicoll.allreduce(np.zeros(1), comm=comm)
    comm.Allreduce(MPI.IN_PLACE, np.zeros(1), MPI.SUM)
    # The shm algorithms' node memory is made once per communicator (its communicator, the
    # mailbox and the scratch segment, sized for the largest call here): before the handle
    # probe.
    if node_layout.n_nodes == 1:
        node = node_shm(pcomm, node_layout.members[0])
        node.mailbox()
        if not node.cma:
            node.segment(2 * size * max_count * 16)
    shm_before = shm_stats()
    probe = comm.Dup()
    handle0 = probe.py2f()
    probe.Free()
    with _Tracker() as tracker:
        for i in range(calls):
            rng = np.random.default_rng([seed, i])
            case = _draw(rng, size, max_count, node_layout, prefer)
            if case["algorithm"] == prefer:
                preferred += 1
            if p2p:
                inbox = np.full(2, -1, dtype=np.int64)
                out = np.array([i, rank], dtype=np.int64)
                rreq = comm.Irecv(inbox, MPI.ANY_SOURCE, MPI.ANY_TAG)
                sreq = comm.Isend(out, (rank + 1) % size, i % 32768)
            try:
                ok, detail = _one(comm, case, [seed, i], rank, size)
            except Exception as exc:  # a soak failure is a finding, keep counting
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            n_leak = tracker.leaked()
            leaked += n_leak
            if p2p:
                status = MPI.Status()
                MPI.Request.Waitall([rreq, sreq], [status, MPI.Status()])
                src = (rank - 1) % size
                if (inbox[0] != i or inbox[1] != src or status.Get_source() != src
                        or status.Get_tag() != i % 32768):
                    p2p_bad += 1
                    ok, detail = False, (f"user p2p message corrupted: {inbox} "
                                         f"from {status.Get_source()}")
            stats = by_prim.setdefault(case["primitive"], [0, 0])
            stats[0] += 1
            if not ok:
                mismatches += 1
                stats[1] += 1
                if len(errors) < max_errors:
                    errors.append(dict(call=i, rank=rank, detail=detail, **case))
            if (i + 1) % every == 0 or i + 1 == calls:
                rss.append(_rss())
                if progress is not None and rank == 0:
                    progress(i + 1, dict(mismatches=mismatches, leaked_requests=leaked,
                                         seconds=round(time.perf_counter() - started, 1)))
        comm.Barrier()
        stray_private = _stray(pcomm)
        stray_user = _stray(comm)
        comm.Barrier()
        created = tracker.created
        comms_used = len(tracker.comms)
        same_private = all(c is pcomm for c in tracker.comms.values())
    probe = comm.Dup()
    handle1 = probe.py2f()
    probe.Free()
    shm_after = shm_stats()
    if check is not None:
        set_check(comm, old_mode)
    elapsed = time.perf_counter() - started
    growth = (rss[-1] - rss[0]) if len(rss) > 1 else 0
    mine = np.array([mismatches, leaked, stray_private, stray_user, p2p_bad, created,
                     comms_used, int(same_private), int(handle0 == handle1), growth, rss[-1]],
                    dtype=np.int64)
    tot = np.empty_like(mine)
    mx = np.empty_like(mine)
    mn = np.empty_like(mine)
    comm.Allreduce(mine, tot, MPI.SUM)
    comm.Allreduce(mine, mx, MPI.MAX)
    comm.Allreduce(mine, mn, MPI.MIN)
    all_errors = [e for errs in comm.allgather(errors) for e in errs][:max_errors]
    samples = comm.allgather(rss)
    rss_mib = [round(max(col) / 2**20, 1) for col in zip(*samples, strict=False)]
    counts = {}
    for p, (n, _bad) in by_prim.items():   # identical draws on every rank
        counts[p] = n
    return dict(
        ranks=size, calls=calls, seed=seed, max_count=max_count, p2p=p2p,
        check=check or os.environ.get("MPICOLL_CHECK", "") or "agree",
        seconds=round(elapsed, 1),
        mismatches=int(tot[0]),                     # rank-calls that failed
        leaked_requests=int(tot[1]),
        requests_tracked=int(tot[5]),
        stray_messages_private=int(tot[2]),
        stray_messages_user=int(tot[3]),
        user_p2p_corrupted=int(tot[4]),
        private_comms_used=int(mx[6]),
        private_comm_stable=bool(mn[7]),
        comm_handle_probe_stable=bool(mn[8]),
        rss_growth_bytes_max=int(mx[9]),
        rss_final_bytes_max=int(mx[10]),
        rss_samples_mib=rss_mib,          # largest rank's RSS after each tenth of the run
        calls_per_primitive=counts,
        prefer=prefer, calls_with_preferred=preferred,
        # Shared windows alive on this rank (the shm algorithms' scratch segment) before
        # and after the run: a growing count would be a leak.
        shm_windows=[shm_before["windows"], shm_after["windows"]],
        shm_bytes=[shm_before["bytes"], shm_after["bytes"]],
        first_errors=all_errors,
    )


def clean(summary, rss_limit=16 << 20):
    """True when the summary shows no mismatch, leak or stray message and flat memory."""
    return (summary["mismatches"] == 0 and summary["leaked_requests"] == 0
            and summary.get("shm_windows", [0, 0])[1] <= summary.get("shm_windows", [0, 0])[0]
            and summary["stray_messages_private"] == 0 and summary["stray_messages_user"] == 0
            and summary["user_p2p_corrupted"] == 0 and summary["private_comms_used"] <= 1
            and summary["private_comm_stable"] and summary["comm_handle_probe_stable"]
            and summary["rss_growth_bytes_max"] <= rss_limit)


def main(argv=None):
    """``python -m mpicoll.testing.soak`` on ``argv`` (default: the command line); exit status."""
    ap = argparse.ArgumentParser(prog="python -m mpicoll.testing.soak",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=10000, help="random calls (default 10000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-count", type=int, default=20000, help="largest count drawn (elements)")
    ap.add_argument("--no-p2p", action="store_true", help="no interleaved user point-to-point")
    ap.add_argument("--prefer", metavar="ALGORITHM",
                    help="run this algorithm wherever the drawn primitive has one (e.g. shm: "
                         "the shared-memory algorithms on every call of allreduce, bcast, ...)")
    ap.add_argument("--check", action="store_true", help="run in checked mode (MPICOLL_CHECK=1)")
    ap.add_argument("--rss-limit-mib", type=float, default=16.0,
                    help="largest resident-memory growth counted as flat (MiB, default 16)")
    ap.add_argument("--json", metavar="PATH", help="also write the summary as JSON (rank 0)")
    args = ap.parse_args(argv)
    if args.calls < 1 or args.max_count < 0:
        ap.error("--calls must be >= 1 and --max-count >= 0")
    rank = MPI.COMM_WORLD.Get_rank()

    def progress(i, s):
        print(f"[soak] {i}/{args.calls} calls, {s['mismatches']} mismatches, "
              f"{s['leaked_requests']} leaked requests, {s['seconds']} s", flush=True)
    summary = soak(calls=args.calls, seed=args.seed, max_count=args.max_count,
                   p2p=not args.no_p2p, check="checked" if args.check else None,
                   progress=progress, prefer=args.prefer)
    ok = clean(summary, int(args.rss_limit_mib * (1 << 20)))
    summary["clean"] = ok
    if rank == 0:
        text = json.dumps(summary, indent=2, default=str)
        print(text)
        if args.json:
            with open(args.json, "w") as f:
                f.write(text + "\n")
        print(f"[soak] {'PASS' if ok else 'FAIL'}: N={summary['ranks']} calls={summary['calls']} "
              f"mismatches={summary['mismatches']} leaked_requests={summary['leaked_requests']} "
              f"stray={summary['stray_messages_private'] + summary['stray_messages_user']} "
              f"rss_growth={summary['rss_growth_bytes_max'] / 2**20:.1f} MiB "
              f"shm_windows={summary['shm_windows'][1]} ({summary['shm_bytes'][1]} B) "
              f"in {summary['seconds']} s", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    from ..core.failfast import run_main
    run_main(main)
