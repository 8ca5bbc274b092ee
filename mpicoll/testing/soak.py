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
must be unchanged. What a case runs is its primitive's: ``Primitive.soak``
(in ``calls/<primitive>.py``), given a :class:`SoakCase` (the drawn case and
helpers making its seeded data), runs it both ways; whether an op is drawn
follows ``Primitive.reduces``. A primitive defined without a soak case (a
plug-in's ``Primitive(soak=None)``) is not drawn.

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

__all__ = ["soak", "main", "SoakCase"]

DTYPES = ["float64", "float32", "int32", "int64", "int16", "uint8", "uint32", "complex128", "bool"]
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

    from ..calls.primitive import DEFINED

    def runs(fn, commutative):
        check = getattr(fn, "check_layout", None)
        return layout is None or check is None or check(layout, commutative) is None
    # a primitive defined without a soak case (a plug-in's) is not drawn
    prims = [p for p in mpicoll.PRIMITIVES if getattr(DEFINED.get(p), "soak", None) is not None]
    prim = prims[rng.integers(len(prims))]
    names = [a for a in mpicoll.algorithms(prim)
             if runs(mpicoll.algorithm_info(prim, a), True)] + ["auto"]
    algo = names[rng.integers(len(names))]
    if prefer in names:
        algo = prefer
    dtype = DTYPES[rng.integers(len(DTYPES))]
    kind = np.dtype(dtype).kind
    opname = None
    if DEFINED[prim].reduces:
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


class SoakCase:
    """One drawn case as a primitive's ``soak(k)`` sees it (:mod:`mpicoll.calls.primitive`).

    The case: ``comm``, ``rank``, ``size``, ``c`` (the count), ``dt`` (the dtype name),
    ``root``, ``op`` (an ``MPI.Op``, or None where the primitive takes none), ``opname``,
    ``in_place``, ``kw`` (``comm=`` and ``algorithm=`` for mpicoll's call) and ``mine``
    (this rank's vector of ``c`` elements, which must come back unchanged; so must every
    buffer passed through :meth:`kept`); :attr:`api` is :mod:`mpicoll.api` (the public
    functions). Every random value comes from a generator
    seeded by the call's seed and a tag (:meth:`rng`), so that it is the same on every
    rank whatever else was drawn.
    """

    def __init__(self, comm, case, rng, rank, size):
        self.comm, self.case, self.seed, self.rank, self.size = comm, case, list(rng), rank, size
        self.c, self.dt, self.root, self.in_place = (case[k] for k in (
            "count", "dtype", "root", "in_place"))
        self.opname = case["op"]
        self.op = _op(self.opname) if self.opname else None
        self.kw = dict(comm=comm, algorithm=case["algorithm"])
        self.mine = self.data([rank], self.c, self.opname or "SUM")
        self.kept_bufs = []

    @property
    def api(self):
        """:mod:`mpicoll.api`: the public functions."""
        from .. import api
        return api

    @property
    def is_root(self):
        """Whether this rank is the case's root."""
        return self.rank == self.root

    def rng(self, *parts):
        """The generator seeded by the call's seed and ``parts``."""
        return np.random.default_rng([*self.seed, *parts])

    def data(self, parts, n, opname="SUM"):
        """``n`` values from :meth:`rng` of ``parts`` whose reduction with ``opname`` is exact."""
        return _data(self.rng(*parts), n, self.dt, opname)

    def zeros(self, *shape):
        """Zeros of the case's dtype."""
        return np.zeros(shape, self.dt)

    def empty(self, *shape):
        """An uninitialised array of the case's dtype."""
        return np.empty(shape, self.dt)

    def nothing(self):
        """``(got, want)`` where there is nothing to compare (off the root, ...)."""
        none = np.zeros(0, self.dt)
        return none, none

    def run(self, fn, send, recv, *args, in_place=None, inout=None):
        """``fn(send, recv, *args)`` with ``comm=`` and ``algorithm=``, or in place.

        In place (by default where the case is): ``fn(MPI.IN_PLACE, buf, *args)``, ``buf``
        being ``inout()``, or a copy of ``send`` without ``inout``.
        """
        if self.in_place if in_place is None else in_place:
            return fn(MPI.IN_PLACE, send.copy() if inout is None else inout(), *args, **self.kw)
        return fn(send, recv, *args, **self.kw)

    def kept(self, buf, failure):
        """``buf``, remembered: the case fails with ``failure`` if the call changes it."""
        self.kept_bufs.append((buf, buf.copy(), failure))
        return buf

    def own_row(self):
        """An N x c zero buffer with ``mine`` in this rank's row (a gather's in-place input)."""
        buf = self.zeros(self.size, self.c)
        buf[self.rank] = self.mine
        return buf

    def rooted(self, got, want, name):
        """``(got, want)`` on the root; off it nothing, or a failure if ``name`` returned one."""
        if self.is_root:
            return got, want
        if got is not None:
            return f"{name} returned a value off the root"
        return self.nothing()

    def v_layout(self):
        """The v primitives' ``(counts, displs, extent)``: counts in [0, c], random gaps."""
        return _layout(self.rng(self.size, 13), self.size, self.c)

    def v_block(self, counts):
        """This rank's v block: ``counts[rank]`` values."""
        return self.data([self.rank, 17], counts[self.rank])

    def v_placed(self, n, counts, displs, r, block):
        """``n`` zeros with ``block`` at rank ``r``'s place (a v gather's in-place input)."""
        buf = self.zeros(n)
        buf[displs[r]:displs[r] + counts[r]] = block
        return buf


def _one(comm, case, rng, rank, size):
    """Run one case with mpicoll and natively (the primitive's ``soak``); return (ok, detail)."""
    from ..calls.primitive import DEFINED
    k = SoakCase(comm, case, rng, rank, size)
    keep = k.mine.copy()
    res = DEFINED[case["primitive"]].soak(k)
    if isinstance(res, str):
        return False, res
    got, want = res
    for buf, copy, failure in k.kept_bufs:
        if not np.array_equal(buf, copy):
            return False, failure
    if not np.array_equal(k.mine, keep):
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
