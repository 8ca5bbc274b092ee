"""The sweep: every registered algorithm over the sizes a cluster has, and its report.

:func:`algorithms` lists what is swept — every algorithm in the registry but
``native`` (the MPI library's own has no plan), plus the configured variants
an algorithm names through a ``variants()`` attribute (the node-aware ones:
every intra option, every inter algorithm) — so an algorithm registered
anywhere, a plug-in included, is swept without being named here.

:func:`cases` is the grid of one algorithm:

- N = 1 .. 64, then 2^k - 1, 2^k, 2^k + 1 up to ``max_n``;
- counts: vectors (bcast, reduce, allreduce, reduce_scatter, scan, exscan)
  0, 1, N - 1, N + 1, a prime above 3N/2 and 8N + 5; blocks (gather,
  allgather, scatter, alltoall and the v-collectives, whose buffers are N
  blocks) 0, 1, N - 1, N + 1, 7 and 13 up to N = 64, then 0, 1 and 3;
- every root up to N = 8, then roots 0, N - 1 and one drawn with ``seed``;
- ops: built-in and non-commutative user op (where the algorithm takes
  one), and up to N = 64 a commutative user op (it writes its second
  operand) for two of the roots; above N = 64 each count is run once, the
  roots and ops taking turns;
- in place and out of place, equal and ragged v-counts with packed and
  gapped displacements, item sizes 8 and 64 KiB (for algorithms whose plans
  depend on it), node layouts block, cyclic, uneven and scattered for the
  node-aware algorithms: every combination up to N = 8, taking turns above
  (each value meets many counts, roots and ops); the node-aware variants
  (``variants()``) up to N = 32, taking turns;
- above N = 64, an algorithm whose plans total more than ``BIG`` operations
  at N = 2^k (a ring, a pairwise exchange: O(N^2) in all) is run once per
  N — count N at powers of two (N + 1 next to them; blocks of 1 and 3), the
  built-in op, one root — and above 257 ranks at powers of two only: its
  recording and execution take seconds per case at N = 512 and about 20 s
  at N = 1024.

:func:`run` verifies the cases (in ``jobs`` processes) and :func:`report`
prints a table: per algorithm and range of N, the number of cases passed,
or the first failure — the smallest failing case, which ``python -m
mpicoll.verify --case "..."`` re-runs alone.
"""
import os
import random
import time
from collections import defaultdict
from dataclasses import dataclass

from ._mpicoll import PRIMITIVES, lookup
from ._mpicoll import algorithms as registered
from .check import Result, record, verify
from .executor import Failure
from .spec import COUNTED, DATALESS, IN_PLACE, REDUCING, ROOTED, V_PRIMITIVES, VECTOR, Case, setup

__all__ = ["algorithms", "cases", "run", "report", "sizes", "Summary", "BIG", "WorkerLost"]

#: Above N = 64, algorithms with more plan operations than this in all (at the next power
#: of two) are swept at fewer counts and ops.
BIG = 150_000
#: Layouts the node-aware algorithms are run on.
LAYOUTS_SMALL = (None, "block:4", "cyclic:3", "uneven", "scattered:3")
LAYOUTS_LARGE = ("block:16", "cyclic:8")
RANGES = ((1, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 512),
          (513, 1024), (1025, 1 << 30))


def algorithms(primitive=None, algorithm=None):
    """``[(primitive, algorithm name)]`` to sweep (configured variants included)."""
    out = []
    for p in PRIMITIVES:
        if primitive and p != primitive:
            continue
        for name in registered(p):
            if name == "native":
                continue
            fn = lookup(p, name)
            names = [name] + list(getattr(fn, "variants", lambda: [])())
            for n in names:
                if algorithm and n != algorithm and n.partition(":")[0] != algorithm:
                    continue
                out.append((p, n))
    return out


def sizes(max_n):
    """1 .. 64, then 2^k - 1, 2^k, 2^k + 1 up to ``max_n``."""
    ns = set(range(1, min(64, max_n) + 1))
    k = 6
    while (1 << k) - 1 <= max_n:
        ns |= {n for n in ((1 << k) - 1, 1 << k, (1 << k) + 1) if n <= max_n}
        k += 1
    return sorted(ns)


def _prime_above(x):
    n = max(2, int(x) + 1)
    while any(n % d == 0 for d in range(2, int(n ** 0.5) + 1)):
        n += 1
    return n


def counts(primitive, N, small):
    if primitive in DATALESS:
        return [0]
    if primitive in VECTOR:
        return sorted({0, 1, max(0, N - 1), N + 1, _prime_above(3 * N / 2), 8 * N + 5})
    if small:
        return sorted({0, 1, max(0, N - 1), N + 1, 7, 13})
    return [0, 1, 3]


def _roots(primitive, N, rng):
    if primitive not in ROOTED:
        return [0]
    if N <= 8:
        return list(range(N))
    return sorted({0, N - 1, rng.randrange(N)})


def _ops(primitive, fn, small):
    """The op kinds of the main grid.

    "sum" stands for both commutative kinds: the built-in and the user op take turns with
    it (see :func:`cases`).
    """
    if primitive not in REDUCING:
        return [None]
    if getattr(fn, "commutative_only", False):
        return ["sum"]
    return ["sum", "noncomm"]


_ITEMSIZE_MATTERS = {}


def itemsize_matters(primitive, algorithm):
    """Whether the algorithm's plans change with the item size (segments, size-based choices)."""
    key = (primitive, algorithm)
    if key not in _ITEMSIZE_MATTERS:
        a = _plans_shape(primitive, algorithm, 8)
        b = _plans_shape(primitive, algorithm, 1 << 16)
        _ITEMSIZE_MATTERS[key] = a != b
    return _ITEMSIZE_MATTERS[key]


#: what the code under test may raise that the sweep reports instead of ending: a plug-in's
#: ``sys.exit`` too (SystemExit is no Exception; it would end a worker, or the serial sweep)
REPORTED = (Exception, SystemExit)


def _plans_shape(primitive, algorithm, itemsize):
    case = Case(primitive, algorithm, 5, 17, op="sum" if primitive in REDUCING else None,
                itemsize=itemsize, layout="block:2" if _node_aware(primitive, algorithm) else None)
    try:
        s = setup(case)
        out = []
        for r, rs in enumerate(s.ranks):
            p = record(s.fn, r, case.N, rs.args, itemsize, False, s.layout)
            out.append(tuple((op[0],) + tuple(
                (x.buf, x.start, x.stop) if hasattr(x, "buf") else x for x in op[1:])
                for op in p.ops))
        return tuple(out)
    except REPORTED as exc:           # unrecordable: the sweep reports it
        return repr(exc)


def _node_aware(primitive, algorithm):
    return getattr(lookup(primitive, algorithm), "check_layout", None) is not None


_OPS_AT = {}


def plan_ops(primitive, algorithm, N):
    """Operations in all ranks' plans at N (estimated from a few ranks), for the grid."""
    key = (primitive, algorithm, N)
    if key not in _OPS_AT:
        n = N + 1 if primitive in VECTOR else 3
        case = Case(primitive, algorithm, N, n, op="sum" if primitive in REDUCING else None)
        try:
            s = setup(case)
            sample = sorted({0, 1 % N, 2 % N, N // 3, N // 2, N - 2, N - 1})
            lens = []
            for r in sample:
                rs = s.ranks[r]
                lens.append(len(record(s.fn, r, N, rs.args, 8, False, s.layout).ops)
                            if rs.calls else 0)
            lens.sort()
            # the typical rank times N, plus the busiest one (a root) on top
            _OPS_AT[key] = lens[len(lens) // 2] * N + lens[-1]
        except REPORTED:              # (the sweep's case reports it)
            _OPS_AT[key] = 0
    return _OPS_AT[key]


def _secondary(primitive, algorithm, N, small, variant):
    """The other axes of a case: in place, v-shape, layout, item size (each a list)."""
    node_aware = _node_aware(primitive, algorithm)
    inplace = [False, True] if primitive in IN_PLACE and small else [False]
    if primitive in V_PRIMITIVES:
        vshapes = [("even", "packed"), ("ragged", "gaps")] if small else [("ragged", "gaps")]
    elif primitive in COUNTED:
        vshapes = [("even", "packed"), ("ragged", "packed")] if small else [("even", "packed")]
    else:
        vshapes = [("even", "packed")]
    layouts = (LAYOUTS_SMALL if small else LAYOUTS_LARGE) if node_aware else (None,)
    if variant:
        layouts = layouts[:3]
    itemsizes = [8, 1 << 16] if small and itemsize_matters(primitive, algorithm) else [8]
    return inplace, vshapes, layouts, itemsizes


def cases(primitive, algorithm, max_n=1024, seed=0, min_n=1):
    """The cases of one algorithm (see the module doc)."""
    rng = random.Random(f"{seed}/{primitive}/{algorithm}")
    fn = lookup(primitive, algorithm)
    variant = ":" in algorithm
    out = []
    for N in sizes(max_n):
        if N < min_n or (variant and N > 32):
            continue
        small = N <= 64
        big = not small and plan_ops(primitive, algorithm, 1 << (N - 1).bit_length()) > BIG
        if big and N > 257 and N != 1 << (N - 1).bit_length():
            continue                # O(N^2) plans: above 257 ranks, powers of two only
        ns = counts(primitive, N, small)
        ops = _ops(primitive, fn, small)
        roots = _roots(primitive, N, rng)
        if big:
            # one case: an even count at powers of two (the declared cost is exact there
            # for the chunked algorithms), an uneven one next to them
            pow2 = N & (N - 1) == 0
            ns = ([N] if pow2 else [N + 1]) if primitive in VECTOR else ([1] if pow2 else [3])
            ops = ops[:1]
            roots = [roots[-1]]
        if variant and len(roots) > 2:
            roots = sorted({0, N - 1, rng.randrange(N)})
        inplace, vshapes, layouts, itemsizes = _secondary(primitive, algorithm, N, small,
                                                          variant)
        if small:
            main = [(root, n, op) for root in roots for n in ns for op in ops]
        else:
            # every count once, the roots and ops taking turns (each meets several counts)
            main = [(roots[i % len(roots)], n, ops[i % len(ops)]) for i, n in enumerate(ns)]
        if small and "sum" in ops:
            # a commutative user op writes its second operand: other plans, same grid
            main += [(root, n, "user") for root in roots[:2] for n in ns]
        if N <= 8 and not variant:
            # every combination
            for root, n, op in main:
                for ip in inplace:
                    for vc, dp in vshapes:
                        for lay in layouts:
                            for it in itemsizes:
                                out.append(Case(primitive, algorithm, N, n, root=root, op=op,
                                                itemsize=it, inplace=ip, vcounts=vc, displs=dp,
                                                layout=lay))
            continue
        # above: the other axes take turns, so that each of their values meets many
        # (root, count, op) combinations without multiplying the cases
        for i, (root, n, op) in enumerate(main):
            ip = inplace[i % len(inplace)]
            vc, dp = vshapes[(i // len(inplace)) % len(vshapes)]
            lay = layouts[(i + i // 3) % len(layouts)]
            # (64 KiB items: many segments, so only with the shorter counts)
            it = itemsizes[(i // 2) % len(itemsizes)] if n <= 2 * N + 1 else 8
            out.append(Case(primitive, algorithm, N, n, root=root, op=op, itemsize=it,
                            inplace=ip, vcounts=vc, displs=dp, layout=lay))
    return out


# -- running -----------------------------------------------------------------

_IN_HAND = None        # a worker's slot of the shared array of cases in hand (see run)


def _init(imports, in_hand=None, workers=None):
    global _IN_HAND
    if in_hand is not None:
        with workers.get_lock():
            slot = workers.value % len(in_hand)
            workers.value += 1
        _IN_HAND = (in_hand, slot)
    if imports:
        from ._mpicoll import import_modules
        import_modules(imports)


def _one(args):
    """Verify one case in a worker; plain values only, so the parent can always read them.

    A worker's answer that the parent cannot unpickle kills the pool's result thread and
    leaves the parent waiting forever, so nothing of the plug-in's (its exceptions, its
    objects) crosses: anything the check itself raises (:data:`REPORTED`) becomes a failure
    of kind ``error``.
    """
    case, seed, index = args
    if _IN_HAND is not None:          # which case this worker holds, should it not come back
        _IN_HAND[0][_IN_HAND[1]] = index
    try:
        r = verify(case, seed)
        fail = (str(r.failure.kind), str(r.failure.text)) if r.failure is not None else None
        traffic = tuple(r.traffic) if r.traffic is not None else None
        path = tuple(r.path) if r.path is not None else None
        return (str(r.status), fail, str(r.reason), traffic, path, str(r.cost))
    except REPORTED as exc:           # the check's own error: this case's failure
        return ("fail", ("error", f"the check raised {type(exc).__name__}: {exc}"), "", None,
                None, "")


def _probe(args, imports):
    _init(imports)
    _one(args)


def _result(case, answer):
    status, fail, reason, traffic, path, cost = answer
    return Result(case, status, Failure(*fail) if fail else None, reason, traffic, path, cost)


class WorkerLost(RuntimeError):
    """A worker process of a parallel sweep ended without answering (never a hang)."""


def _lost(ctx, work, in_hand, imports, done):
    """The error for a worker that died, naming the case that ends a process.

    The cases the workers held when the pool broke are re-run, each in a process of its own.
    """
    held = sorted({i for i in in_hand if i >= 0})
    for i in held:
        child = ctx.Process(target=_probe, args=(work[i], list(imports)))
        child.start()
        child.join(60)
        if child.is_alive():
            child.kill()
            child.join()
            continue
        if child.exitcode != 0:
            return WorkerLost(
                f"case {work[i][0].text()!r} ends the process that verifies it (exit code "
                f"{child.exitcode}: os._exit, a signal or a crash in the code under test); the "
                f"sweep stopped after {done} of {len(work)} cases")
    return WorkerLost(
        f"a worker process ended without answering after {done} of {len(work)} cases; the "
        f"cases the workers held, each re-run alone, ended normally: "
        f"{', '.join(repr(work[i][0].text()) for i in held) or 'none'}")


def run(all_cases, seed=0, jobs=1, imports=(), progress=None):
    """Verify ``all_cases``; a list of :class:`~.check.Result` in the same order.

    With ``jobs`` > 1 (and 50 cases or more) the cases run in a pool of processes. A worker
    that ends without answering (``os._exit``, a signal, a crash in the code under test)
    raises :class:`WorkerLost` naming the case that ends its process, instead of leaving the
    parent waiting for an answer that never comes (as ``multiprocessing.Pool`` does).
    """
    work = [(c, seed, i) for i, c in enumerate(all_cases)]
    if jobs <= 1 or len(work) < 50:
        out = []
        for i, w in enumerate(work):
            out.append(_result(w[0], _one(w)))
            if progress:
                progress(i + 1, len(work))
        return out
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    # the largest cases first, so that no process is left with one at the end
    order = sorted(range(len(work)), key=lambda i: -(work[i][0].N * max(1, work[i][0].count)))
    res = [None] * len(work)
    ctx = mp.get_context("fork" if hasattr(os, "fork") else "spawn")
    in_hand = ctx.Array("q", [-1] * jobs, lock=False)
    done, lost = 0, None
    # (the executor, unlike Pool, fails its waiting results when a worker dies)
    with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init,
                             initargs=(list(imports), in_hand, ctx.Value("i", 0))) as pool:
        try:
            results = pool.map(_one, [work[i] for i in order], chunksize=8)
            for i, r in zip(order, results, strict=True):
                res[i] = _result(work[i][0], r)
                done += 1
                if progress:
                    progress(done, len(work))
        except BrokenProcessPool:
            lost = _lost(ctx, work, list(in_hand), imports, done)
    if lost is not None:
        raise lost
    return res


# -- the report ----------------------------------------------------------------

@dataclass
class Summary:
    """The outcome of a sweep, per algorithm."""

    results: list
    seconds: float = 0.0

    def by_algorithm(self):
        """The results grouped by ``(primitive, algorithm)``."""
        out = defaultdict(list)
        for r in self.results:
            out[(r.case.primitive, r.case.algorithm)].append(r)
        return out

    @property
    def failures(self):
        """The results that failed."""
        return [r for r in self.results if r.status == "fail"]

    def first_failures(self):
        """The smallest failing case of each algorithm (fewest ranks, then elements)."""
        best = {}
        for r in self.failures:
            k = (r.case.primitive, r.case.algorithm)
            key = (r.case.N, r.case.count, r.case.root)
            if k not in best or key < best[k][0]:
                best[k] = (key, r)
        return {k: v[1] for k, v in best.items()}


def _range_of(N):
    for lo, hi in RANGES:
        if lo <= N <= hi:
            return lo, hi
    return RANGES[-1]


def report(summary, out=print, max_n=None):
    """The summary table, the failures with their smallest case, and what was not verified."""
    by = summary.by_algorithm()
    used = sorted({_range_of(r.case.N) for r in summary.results})
    heads = [f"N={lo}-{hi}" if hi < (1 << 30) else f"N>{lo - 1}" for lo, hi in used]
    rows = []
    for (p, a), rs in sorted(by.items(), key=lambda kv: (PRIMITIVES.index(kv[0][0]), kv[0][1])):
        cells = []
        for rg in used:
            sub = [r for r in rs if _range_of(r.case.N) == rg]
            if not sub:
                cells.append("-")
                continue
            bad = [r for r in sub if r.status == "fail"]
            unv = [r for r in sub if r.status == "unverified"]
            if bad:
                cells.append(f"FAIL N={min(r.case.N for r in bad)}")
            elif unv and not any(r.status == "pass" for r in sub):
                cells.append("unverified")        # the rest refused by the algorithm
            else:
                cells.append(str(sum(1 for r in sub if r.status == "pass")))
        rows.append([f"{p}/{a}"] + cells)
    width = [max(len(r[i]) for r in rows + [["algorithm"] + heads]) for i in range(len(heads) + 1)]
    line = "  ".join(h.ljust(width[i]) if i == 0 else h.rjust(width[i])
                     for i, h in enumerate(["algorithm"] + heads))
    out("cases passed, per algorithm and range of ranks N (FAIL N=k: the smallest failing N,")
    out("its smallest case below; unverified: not recordable as a plan; -: no case there)")
    out(line)
    out("-" * len(line))
    for r in rows:
        out("  ".join(c.ljust(width[i]) if i == 0 else c.rjust(width[i]) for i, c in enumerate(r)))
    n = len(summary.results)
    npass = sum(1 for r in summary.results if r.status == "pass")
    nskip = sum(1 for r in summary.results if r.status == "skip")
    costed = sum(1 for r in summary.results if r.cost == "checked")
    out("")
    out(f"{n} cases: {npass} passed, {len(summary.failures)} failed, {nskip} refused by the "
        f"algorithm (its own rule: commutative ops only, rank order on these nodes), "
        f"{sum(1 for r in summary.results if r.status == 'unverified')} unverified; the declared "
        f"cost checked exactly in {costed} ({summary.seconds:.0f} s)")
    natives = sorted({r.case.primitive for r in summary.results})
    out(f"not swept: native ({', '.join(natives)}): the MPI library's own collective has no "
        f"plan")
    nocost = sorted({f"{r.case.primitive}/{r.case.algorithm}" for r in summary.results
                     if r.cost == "none"})
    if nocost:
        out(f"no declared cost (results checked, traffic not): {', '.join(nocost)}")
    unv = {}
    for r in summary.results:
        if r.status == "unverified":
            unv.setdefault(f"{r.case.primitive}/{r.case.algorithm}", r.reason)
    for name, why in sorted(unv.items()):
        out(f"unverified: {name}: {why}")
    firsts = summary.first_failures()
    for (p, a), r in sorted(firsts.items()):
        nfail = sum(1 for x in by[(p, a)] if x.status == "fail")
        out("")
        out(f"FAIL {p}/{a}: {nfail} case(s); the smallest:")
        out(f"  python -m mpicoll.verify --case \"{r.case.text()}\"")
        out(f"  {r.failure.kind}: {r.failure.text}")
    return not summary.failures


def sweep(primitive=None, algorithm=None, max_n=1024, seed=0, jobs=1, imports=(),
          progress=None, min_n=1):
    """Build the grid of every algorithm and verify it; a :class:`Summary`."""
    t0 = time.perf_counter()
    todo = []
    for p, a in algorithms(primitive, algorithm):
        todo += cases(p, a, max_n, seed, min_n)
    results = run(todo, seed, jobs, imports, progress)
    return Summary(results, time.perf_counter() - t0)
