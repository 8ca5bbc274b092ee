"""Cost model: ``fit`` measures α, β, γ here; ``predict`` charts algorithms and crossovers.

``fit`` (under MPI, N >= 2):

- α, β: a ping-pong sweep, all ranks paired up at once (0-1, 2-3, ...), one-way
  time t(n) = α + nβ fitted by least squares on relative error;
- γ: the local reduction (NumPy ``add`` in place, as mpicoll's combine) on
  every rank at once, t(n) = c + nγ;
- o: mpicoll's own per-call cost (validation, no message: a zero-element call);
- then a small sweep of each algorithm, printed as predicted (o + cost from
  :mod:`.costs`) vs measured time with the relative error.

``predict --ranks 2..10000 --bytes 8,64K,16M`` evaluates the costs of every
hand-written algorithm with a fitted model (``--model model.json``) or given
α/β/γ, names the best algorithm over N and the crossover points, and charts
time against N per algorithm (``-o chart.png``). ``--bytes`` is ``n`` in the
costs' unit: the vector for bcast/reduce/allreduce/reduce_scatter, one rank's
block for gather/allgather/scatter/alltoall.

Both take the algorithms from the registry (``--import`` adds plug-ins). One
without a formula in :mod:`.costs` is modelled from its recorded plans
(:mod:`.plancost`, model ``plan``); ``predict`` reads plans up to
``PLAN_MAX_RANKS`` ranks and says which algorithms it left out above that.
"""
import json
import math
import time

import numpy as np

from mpicoll import algorithms
from mpicoll._plugins import PluginError, import_modules
from mpicoll._registry import PRIMITIVES
from mpicoll.sched.inspect import plan_of
from mpicoll.sched.plan import NotSchedulable

from .costs import cost
from .plancost import PLAN_MAX_RANKS, count_of, load, model_of, plan_cost, plannable
from .units import fmt_size, iterations, parse_range, parse_size, size_sweep

__all__ = ["add_parsers", "fit_line", "crossovers", "DEFAULT_MODEL"]

#: Illustrative parameters used by ``predict`` without --model (not measured).
DEFAULT_MODEL = {"alpha_s": 2e-6, "beta_s_per_byte": 1 / 10e9, "gamma_s_per_byte": 1 / 5e9,
                 "overhead_s": 0.0, "source": "illustrative defaults (not measured)"}


def _csv(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def add_parsers(sub, sweep_options):
    p = sub.add_parser("fit", help="measure α, β (ping-pong), γ (reduction); predicted vs measured")
    sweep_options(p, b="8", e="1M", f=32.0, n=10, w=2, op=False)
    p.add_argument("--primitive", type=_csv, default=["all"],
                   help="primitives to compare (comma list or all; default all)")
    p.add_argument("--fit-maxbytes", type=parse_size, default=parse_size("4M"),
                   help="largest ping-pong / reduction size (default 4M)")
    p.add_argument("-o", "--output", metavar="MODEL.json", help="write the model here")
    p.add_argument("-J", "--results", metavar="FILE", help="the measured sweep as JSON lines")
    p.set_defaults(func=fit, opname="sum")

    q = sub.add_parser("predict", help="chart the model per algorithm; name crossover points")
    q.add_argument("--ranks", default="2..1024", help="LOW..HIGH or a comma list (default 2..1024)")
    q.add_argument("--bytes", default="8,64K,16M",
                   help="n per call: comma list, or LOW..HIGH to also find byte crossovers")
    q.add_argument("--model", help="model JSON written by fit (default: illustrative values)")
    q.add_argument("--alpha", type=float, help="seconds per message")
    q.add_argument("--beta", type=float, help="seconds per byte")
    q.add_argument("--gamma", type=float, help="seconds per byte reduced")
    q.add_argument("--primitive", type=_csv, default=["all"])
    q.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module or .py file first (e.g. one registering an "
                        "algorithm); repeatable")
    q.add_argument("-o", "--output", metavar="CHART.png", help="chart (needs matplotlib)")
    q.add_argument("--json", metavar="FILE", help="crossovers and sampled predictions as JSON")
    q.set_defaults(func=predict)


def fit_line(xs, ts):
    """(c, slope) minimising the relative error of t = c + slope * x."""
    x, t = np.asarray(xs, float), np.asarray(ts, float)
    a = np.stack([1 / t, x / t], axis=1)
    (c, s), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return max(float(c), 0.0), max(float(s), 0.0)


def _pingpong(comm, sizes, iters0):
    """Mean one-way seconds per size over all concurrent pairs."""
    rank, n = comm.Get_rank(), comm.Get_size()
    peer = rank ^ 1
    active = peer < n
    out = []
    for size in sizes:
        buf = np.zeros(max(size, 1), np.uint8)[:size]
        iters, warm = iterations(size, iters0, 3, 64 << 10)
        comm.Barrier()
        t = None
        if active:
            for k in range(warm + iters):
                if k == warm:
                    t0 = time.perf_counter()
                if rank < peer:
                    comm.Send(buf, peer, 7)
                    comm.Recv(buf, peer, 7)
                else:
                    comm.Recv(buf, peer, 7)
                    comm.Send(buf, peer, 7)
            if rank < peer:
                t = (time.perf_counter() - t0) / iters / 2
        every = [x for x in comm.allgather(t) if x is not None]
        out.append(sum(every) / len(every))
    return out


def _reduction(comm, sizes, iters0, dtype):
    out = []
    for size in sizes:
        k = max(1, size // dtype.itemsize)
        a, b = np.ones(k, dtype), np.ones(k, dtype)
        iters, _ = iterations(size, iters0, 0, 64 << 10)
        comm.Barrier()
        np.add(a, b, out=b)
        t0 = time.perf_counter()
        for _ in range(iters):
            np.add(a, b, out=b)
        t = (time.perf_counter() - t0) / iters
        every = comm.allgather(t)
        out.append(sum(every) / len(every))
    return out


def _overhead(comm, dtype, iters=200):
    """Seconds of one mpicoll call that moves nothing (validation and dispatch)."""
    import mpicoll
    a, b = np.empty(0, dtype), np.empty(0, dtype)
    for _ in range(10):
        mpicoll.allreduce(a, b, algorithm="ring", comm=comm)
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        mpicoll.allreduce(a, b, algorithm="ring", comm=comm)
    every = comm.allgather((time.perf_counter() - t0) / iters)
    return sum(every) / len(every)


def hand_written(primitive):
    """The registered algorithms of ``primitive`` that mpicoll runs itself (native excluded)."""
    return [a for a in algorithms(primitive) if a != "native"]


class _PlanLoads:
    """The busiest rank's (messages, bytes, bytes reduced) of a measured call, from its plans.

    Collective: every rank records its own plan and the loads are exchanged,
    so N plans are recorded once, not N times on every rank. None when some
    rank's plan cannot be recorded (the algorithm does more than ctx records).
    """

    def __init__(self, comm, itemsize, root):
        self.comm, self.itemsize, self.root = comm, itemsize, root
        self.cache = {}

    def __call__(self, primitive, algorithm, nbytes):
        key = (primitive, algorithm, nbytes)
        if key not in self.cache:
            comm, n = self.comm, self.comm.Get_size()
            try:
                plan = plan_of(primitive, algorithm, n, comm.Get_rank(),
                               count_of(nbytes, self.itemsize), itemsize=self.itemsize,
                               root=self.root)
                mine = load(plan, self.itemsize)
            except NotSchedulable:
                mine = None
            every = comm.allgather(mine)
            self.cache[key] = None if None in every else \
                tuple(max(x[i] for x in every) for i in range(3))
        return self.cache[key]


def fit(args):
    from .harness import Sweep
    from .results import Sink
    from .run import start

    prims, comm, prov = start(args)
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        raise SystemExit("fit: needs at least 2 ranks (ping-pong)")
    sizes = size_sweep(8, args.fit_maxbytes, 4)
    pp = _pingpong(comm, sizes, 60)
    alpha, beta = fit_line(sizes, pp)
    rsizes = [s for s in sizes if s >= 1024]
    red = _reduction(comm, rsizes, 60, args.dtype)
    red_c, gamma = fit_line(rsizes, red)
    overhead = _overhead(comm, args.dtype)
    say = (lambda s: print(s, flush=True)) if rank == 0 else (lambda s: None)
    say(f"# fit on N={n}: alpha = {alpha * 1e6:.2f} us, beta = {beta * 1e9:.4f} ns/B "
        f"({1e-9 / beta if beta else float('inf'):.2f} GB/s), gamma = {gamma * 1e9:.4f} ns/B "
        f"({1e-9 / gamma if gamma else float('inf'):.2f} GB/s, {args.dtype.name} add), "
        f"call overhead o = {overhead * 1e6:.2f} us")
    sink = Sink(rank, args.results)
    sink.write(prov)
    args.algorithms, args.progress, args.memcpy = ["all"], "off", False
    sweep = Sweep(args, comm, sink, echo=lambda s: None)
    wrong = sweep.run(prims)
    sink.close()
    rows = []
    plan_loads = _PlanLoads(comm, args.dtype.itemsize, args.root)
    for r in sweep.records:
        prim, alg = r["primitive"], r["algorithm"]
        if alg not in hand_written(prim):
            continue            # native, native[...] and the reference columns: no schedule here
        how = model_of(prim, alg)
        if how == "formula":
            pred = overhead + cost(prim, alg, n, r["call_nbytes"], alpha, beta, gamma)
        else:                   # collective: every rank walks the same records in order
            loads = plan_loads(prim, alg, r["call_nbytes"])
            if loads is None:
                how, pred = "none", None
            else:
                msgs, moved, reduced = loads
                pred = overhead + msgs * alpha + moved * beta + reduced * gamma
        meas = r["time_us"]["avg"] * 1e-6
        rows.append({"primitive": prim, "algorithm": alg, "nranks": n, "model": how,
                     "bytes": r["bytes"], "call_nbytes": r["call_nbytes"],
                     "predicted_us": None if pred is None else pred * 1e6,
                     "measured_us": meas * 1e6,
                     "error": (pred - meas) / meas if pred is not None and meas > 0 else None})
    say(f"#{'primitive':>15} {'algorithm':<20} {'size(B)':>10} {'predicted(us)':>14} "
        f"{'measured(us)':>13} {'error':>8}  model")
    for r in rows:
        err = "-" if r["error"] is None else f"{100 * r['error']:+.0f}%"
        pred = "-" if r["predicted_us"] is None else f"{r['predicted_us']:.2f}"
        say(f"{r['primitive']:>16} {r['algorithm']:<20} {r['bytes']:>10} "
            f"{pred:>14} {r['measured_us']:>13.2f} {err:>8}  {r['model']}")
    planned = sorted({f"{r['primitive']}/{r['algorithm']}" for r in rows if r["model"] == "plan"})
    if planned:
        say(f"# model plan (no formula in mpicoll/bench/costs.py): {', '.join(planned)}, "
            f"predicted from the recorded plans (busiest rank's messages, bytes moved and "
            f"bytes reduced; mpicoll.bench.plancost)")
    unmodelled = sorted({f"{r['primitive']}/{r['algorithm']}" for r in rows
                         if r["model"] == "none"})
    if unmodelled:
        say(f"# model none: {', '.join(unmodelled)}: no formula in mpicoll/bench/costs.py and no "
            f"plan to read one from (the algorithm does more than ctx records); measured only")
    errs = [abs(r["error"]) for r in rows if r["error"] is not None]
    if errs:
        say(f"# median |error| {100 * float(np.median(errs)):.0f}%, "
            f"max {100 * max(errs):.0f}% over {len(errs)} points")
    model = {"type": "model", "alpha_s": alpha, "beta_s_per_byte": beta,
             "gamma_s_per_byte": gamma, "reduce_call_s": red_c, "overhead_s": overhead,
             "dtype": args.dtype.name, "nranks": n, "source": "measured by mpicoll.bench fit",
             "pingpong": [{"bytes": s, "one_way_s": t} for s, t in zip(sizes, pp)],
             "reduction": [{"bytes": s, "seconds": t} for s, t in zip(rsizes, red)],
             "comparison": rows, "provenance": prov}
    if rank == 0 and args.output:
        with open(args.output, "w") as f:
            json.dump(model, f, indent=1)
        say(f"# model written to {args.output}")
    comm.Free()
    return 1 if wrong else 0


# -- predict ---------------------------------------------------------------

def _ranks_grid(spec):
    if isinstance(spec, list):
        return sorted(set(spec))
    lo, hi = spec
    if hi - lo <= 100000:
        return list(range(lo, hi + 1))
    grid = set(np.unique(np.geomspace(lo, hi, 4000).astype(int)).tolist())
    grid |= {1 << k for k in range(1, 63) if lo <= 1 << k <= hi} | {lo, hi}
    return sorted(grid)


def _bytes_grid(spec):
    if isinstance(spec, list):
        return sorted(set(spec))
    lo, hi = spec
    return sorted(set(int(round(x)) for x in np.geomspace(max(lo, 1), hi, 400)) | {lo, hi})


def crossovers(xs, times, tol=0.01):
    """Winner segments [(x_first, x_last, algorithm)] of ``times`` {alg: [t per x]}.

    The current winner is kept while it is within ``tol`` of the best, so
    algorithms of (near) equal cost do not flip back and forth.
    """
    algs = list(times)
    segs = []
    for i, x in enumerate(xs):
        best = min(algs, key=lambda a: times[a][i])
        if segs and times[segs[-1][2]][i] <= times[best][i] * (1 + tol):
            best = segs[-1][2]
        if segs and segs[-1][2] == best:
            segs[-1][1] = x
        else:
            segs.append([x, x, best])
    return [tuple(s) for s in segs]


def _is_pow2(n):
    return n > 0 and n & (n - 1) == 0


def model_time(p, al, N, nb, params):
    """o + the algorithm's cost at N ranks and ``nb`` bytes; inf where it is not modelled.

    Algorithms without a formula are read off their plans up to
    ``PLAN_MAX_RANKS`` ranks (above, inf: never a winner, no point drawn).
    """
    a, b, g, o = params
    if model_of(p, al) == "formula":
        return o + cost(p, al, N, nb, a, b, g)
    if not modelled(p, al, N):
        return math.inf
    return o + plan_cost(p, al, N, nb, a, b, g)


def modelled(p, al, N):
    """Whether ``predict`` has a cost for the algorithm at N ranks (see :func:`model_time`)."""
    return model_of(p, al) == "formula" or (N <= PLAN_MAX_RANKS and plannable(p, al))


def _plan_note(p, ns):
    """The line saying which algorithms of ``p`` are modelled from plans, and where; or None."""
    planned = [al for al in hand_written(p) if model_of(p, al) == "plan"]
    if not planned:
        return None, planned
    lost = [al for al in planned if not plannable(p, al)]
    planned = [al for al in planned if al not in lost]
    lines = [f"# {p}: {', '.join(lost)}: no formula in mpicoll/bench/costs.py and no plan to "
             f"read one from (the algorithm does more than ctx records); left out"] if lost else []
    if not planned:
        return "\n".join(lines), planned
    what = ", ".join(planned)
    text = f"# {p}: {what}: no formula in mpicoll/bench/costs.py; modelled from the recorded plans"
    if ns[0] > PLAN_MAX_RANKS:
        text += (f"; left out: every N here is above {PLAN_MAX_RANKS}, where recording every "
                 f"rank's plan is too slow")
    elif ns[-1] > PLAN_MAX_RANKS:
        text += (f" for N <= {PLAN_MAX_RANKS}; left out above (recording every rank's plan "
                 f"is too slow there)")
    return "\n".join(lines + [text]), planned


def rank_segments(p, ns, nb, params):
    """Winner segments over N, separately for powers of two and other N.

    Power-of-two N is where the recursive algorithms need no folding step,
    so the two families have different winners; mixing them would list a
    crossover at every power of two.
    """
    out = {}
    for fam, sel in (("pow2", [N for N in ns if _is_pow2(N)]),
                     ("other", [N for N in ns if not _is_pow2(N)])):
        if sel:
            times = {al: [model_time(p, al, N, nb, params) for N in sel]
                     for al in hand_written(p)}
            out[fam] = crossovers(sel, times)
    return out


def _fmt_segs(segs, fmt=str):
    return " | ".join(f"{fmt(s[0])}..{fmt(s[1])} {s[2]}" if s[0] != s[1] else
                      f"{fmt(s[0])} {s[2]}" for s in segs)


def _model(args):
    m = dict(DEFAULT_MODEL)
    if args.model:
        with open(args.model) as f:
            m.update(json.load(f))
    for k, key in (("alpha", "alpha_s"), ("beta", "beta_s_per_byte"), ("gamma", "gamma_s_per_byte")):
        if getattr(args, k) is not None:
            m[key] = getattr(args, k)
            m["source"] = "command line" if not args.model else m["source"] + " + command line"
    return m


def _nan_for_inf(ts):
    return [t if math.isfinite(t) else math.nan for t in ts]


def predict(args):
    try:
        import_modules(args.imports)
    except PluginError as exc:
        raise SystemExit(str(exc)) from None
    m = _model(args)
    params = (m["alpha_s"], m["beta_s_per_byte"], m["gamma_s_per_byte"], m.get("overhead_s", 0.0))
    a, b, g, o = params
    ranks_spec = parse_range(args.ranks)
    bytes_spec = parse_range(args.bytes, sizes=True)
    ns = _ranks_grid(ranks_spec)
    if not ns or ns[0] < 1:
        raise SystemExit("--ranks: expected ranks >= 1")
    byte_vals = bytes_spec if isinstance(bytes_spec, list) else \
        sorted({bytes_spec[0], int(math.sqrt(max(bytes_spec[0], 1) * bytes_spec[1])), bytes_spec[1]})
    prims = list(PRIMITIVES) if args.primitive == ["all"] else args.primitive
    for p in prims:
        if p not in PRIMITIVES:
            raise SystemExit(f"--primitive: unknown primitive {p!r}")
    print(f"# model ({m['source']}): alpha = {a * 1e6:.3g} us, beta = {b * 1e9:.3g} ns/B, "
          f"gamma = {g * 1e9:.3g} ns/B, per-call overhead = {o * 1e6:.3g} us")
    print("# winner per range of N (powers of two apart: no folding step there); "
          "crossovers = first N of each new winner; ties within 1% keep the previous winner")
    out = {"model": {k: m[k] for k in ("alpha_s", "beta_s_per_byte", "gamma_s_per_byte",
                                       "source")}, "primitives": {}}
    plot_ns = ns if len(ns) <= 600 else sorted(
        {ns[int(i)] for i in np.linspace(0, len(ns) - 1, 600)} | {N for N in ns if _is_pow2(N)})
    for p in prims:
        res = out["primitives"][p] = {"by_ranks": [], "by_bytes": []}
        print(f"## {p}")
        note, planned = _plan_note(p, ns)
        if note:
            print(note)
            res["plan_modelled"] = {"algorithms": planned, "max_ranks": PLAN_MAX_RANKS}
        for nb in (byte_vals if p != "barrier" else [0]):
            fams = rank_segments(p, ns, nb, params)
            entry = {"bytes": nb}
            for fam, segs in fams.items():
                entry[fam] = {"segments": segs, "crossovers": [s[0] for s in segs[1:]]}
                label = "N = 2^k" if fam == "pow2" else "other N"
                cross = ", ".join(str(s[0]) for s in segs[1:]) or "none"
                print(f"  n = {fmt_size(nb)}, {label}: {_fmt_segs(segs)}  (crossovers: {cross})")
            entry["crossovers"] = sorted({x for f in fams.values() for x in [s[0] for s in f[1:]]})
            res["by_ranks"].append(entry)
            if args.output:
                res.setdefault("_curves", {})[nb] = {
                    al: _nan_for_inf([model_time(p, al, N, nb, params) for N in plot_ns])
                    for al in hand_written(p)}
        if p != "barrier" and not isinstance(bytes_spec, list):
            bgrid = _bytes_grid(bytes_spec)
            reps = sorted({ns[0], ns[-1]} | {8 ** k for k in range(1, 8) if ns[0] < 8 ** k < ns[-1]})
            for N in reps:
                times = {al: [model_time(p, al, N, x, params) for x in bgrid]
                         for al in hand_written(p) if modelled(p, al, N)}
                segs = crossovers(bgrid, times)
                res["by_bytes"].append({"nranks": N, "segments": segs,
                                        "crossovers": [s[0] for s in segs[1:]]})
                print(f"  N = {N}: {_fmt_segs(segs, fmt_size)}")
    if args.output:
        from .plot import plot_predictions
        plot_predictions(out, plot_ns, args.output)
        print(f"# chart written to {args.output}")
    if args.json:
        for res in out["primitives"].values():
            res.pop("_curves", None)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0
