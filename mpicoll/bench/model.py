"""Cost model: ``fit`` measures α, β, γ here; ``predict`` charts algorithms and crossovers.

``fit`` (under MPI, N >= 2), on the node layout of the run
(:mod:`mpicoll.core.topology`: shared memory, or ``MPICOLL_NODES`` to simulate nodes):

- α, β inside a node: a ping-pong sweep between ranks of the same node, all
  such pairs at once (0-1, 2-3, ... of each node), one-way time
  t(n) = α + nβ fitted by least squares on relative error;
- α, β between nodes: the same between the first ranks of nodes 0 and 1,
  alone; then between the ranks of nodes 0 and 1 paired up, c pairs at once:
  where that is slower than one pair, the node's link is shared and costs
  α_link = α_c / c per message and β_link = β_c / c per byte (else 0);
  on one node there is no inter-node pair (inter := intra), with one rank
  per node no intra-node pair (intra := inter); the model file says which;
- ``alpha_s``/``beta_s_per_byte`` (the one-level model ``predict`` uses
  without ``--ranks-per-node``) are the inter-node values when there are two
  nodes or more (the slower link: a flat algorithm's busiest rank usually
  crosses nodes), else the intra-node ones — on one node exactly what fit
  measured before it had two levels;
- γ: the local reduction (NumPy ``add`` in place, as mpicoll's combine) on
  every rank at once, t(n) = c + nγ;
- o: mpicoll's own per-call cost (validation, no message: a zero-element call);
- then a small sweep of each algorithm, printed as predicted vs measured time
  with the relative error. Predicted on the run's layout: an algorithm with a
  formula (:mod:`.costs`) costs o + formula(α_intra, β_intra, γ) plus, on two
  nodes or more, what its recorded plans add when every message is priced by
  its link (:func:`.plancost.plan_time2` minus the same at α_intra, β_intra);
  one without (node-aware ``hierarchical`` ones included) costs o + the
  two-level price of its plans. On one node: the one-level model as before.

``predict --ranks 2..10000 --bytes 8,64K,16M`` evaluates the costs of every
hand-written algorithm with a fitted model (``--model model.json``) or given
α/β/γ, names the best algorithm over N and the crossover points, and charts
time against N per algorithm (``-o chart.png``). ``--bytes`` is ``n`` in the
costs' unit: the vector for bcast/reduce/allreduce/reduce_scatter, one rank's
block for gather/allgather/scatter/alltoall.

``predict --ranks-per-node 8,16,64`` uses both levels, N ranks in blocks of K
per node (the last node shorter when K does not divide N), and names where
the node-aware (``hierarchical``) algorithms overtake the best flat one.
Recording every rank's plan at N = 10^4 is too slow, so:

- a flat algorithm with a formula costs :func:`.costs.cost2`: its formula
  at intra-node α, β plus, for the messages of its busiest rank that cross
  nodes (:func:`.costs.link_split`, from its message pattern on blocks),
  the inter-node price instead — exact against pricing every rank's plan
  where N and K are powers of two, an estimate elsewhere (a step counts as
  crossing when any of its pairs does);
- a node-aware algorithm costs its phases (:func:`.plancost.hierarchical_time`):
  the flat algorithms it runs inside the largest node (L = K ranks, intra
  α, β) and among the M = ⌈N/K⌉ node leaders (inter α, β, one rank per node
  on the link), summed — exact on blocks, because the algorithm runs exactly
  those flat algorithms on those groups (equal to pricing its recorded plans
  where N and K are powers of two);
- others (no formula: plug-ins) are priced from every rank's plan on the
  block layout up to ``PLAN_MAX_RANKS`` ranks, left out above.

Ranks grids of more than 600 values are thinned to ~500 geometric points
plus every power of two and K times every power of two, so crossovers are
named to within about 2% of N there.

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
from mpicoll.core.plugins import PluginError, import_modules
from mpicoll.core.registry import PRIMITIVES
from mpicoll.sched.inspect import plan_of
from mpicoll.sched.plan import NotSchedulable

from .costs import cost, cost2, has_cost, has_link_split
from .plancost import (
    HIERARCHICAL_PHASES,
    PLAN_MAX_RANKS,
    Levels,
    block_layout,
    combine,
    count_of,
    hierarchical_time,
    layout_plans,
    link_price,
    model_of,
    node_crossers,
    plan_cost,
    plan_time2,
    plannable,
)
from .units import fmt_size, iterations, parse_range, parse_size, size_sweep

__all__ = ["add_parsers", "fit_line", "crossovers", "DEFAULT_MODEL", "levels_of",
           "model_time2", "predict_two_level"]

#: Illustrative parameters used by ``predict`` without --model (not measured).
DEFAULT_MODEL = {"alpha_s": 2e-6, "beta_s_per_byte": 1 / 10e9, "gamma_s_per_byte": 1 / 5e9,
                 "overhead_s": 0.0, "source": "illustrative defaults (not measured)",
                 "alpha_intra_s": 0.4e-6, "beta_intra_s_per_byte": 1 / 25e9,
                 "alpha_inter_s": 2e-6, "beta_inter_s_per_byte": 1 / 10e9,
                 "link_alpha_s": 0.5e-6, "link_beta_s_per_byte": 1 / 12.5e9}

#: Two-level keys of a model, and the one-level key each falls back to.
_LEVEL_KEYS = (("alpha_intra_s", "alpha_s"), ("beta_intra_s_per_byte", "beta_s_per_byte"),
               ("alpha_inter_s", "alpha_s"), ("beta_inter_s_per_byte", "beta_s_per_byte"))


def _csv(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text):
    import argparse
    try:
        vals = [int(t) for t in _csv(text)]
    except ValueError:
        vals = []
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers K[,K...]; got {text!r}")
    return sorted(set(vals))


def add_parsers(sub, sweep_options):
    """Add the ``fit`` and ``predict`` commands to ``sub`` (the bench's subcommands)."""
    p = sub.add_parser("fit",
                       help="measure α, β (ping-pong), γ (reduction); predicted vs measured")
    sweep_options(p, b="8", e="1M", f=32.0, n=10, w=2, op=False)
    p.add_argument("--primitive", type=_csv, default=["all"],
                   help="primitives to compare (comma list or all; default all)")
    p.add_argument("--fit-maxbytes", type=parse_size, default=parse_size("4M"),
                   help="largest ping-pong / reduction size (default 4M)")
    p.add_argument("-o", "--output", metavar="MODEL.json", help="write the model here")
    p.add_argument("-J", "--results", metavar="FILE", help="the measured sweep as JSON lines")
    p.set_defaults(func=fit, opname="sum")

    q = sub.add_parser("predict", help="chart the model per algorithm; name crossover points")
    q.add_argument("--ranks", default="2..1024",
                   help="LOW..HIGH or a comma list (default 2..1024)")
    q.add_argument("--bytes", default="8,64K,16M",
                   help="n per call: comma list, or LOW..HIGH to also find byte crossovers")
    q.add_argument("--model", help="model JSON written by fit (default: illustrative values)")
    q.add_argument("--alpha", type=float, help="seconds per message")
    q.add_argument("--beta", type=float, help="seconds per byte")
    q.add_argument("--gamma", type=float, help="seconds per byte reduced")
    g = q.add_argument_group(
        "two levels",
        "--ranks-per-node K[,K...] prices N ranks in blocks of K per node with intra- and "
        "inter-node α/β (model keys alpha_intra_s, beta_intra_s_per_byte, alpha_inter_s, "
        "beta_inter_s_per_byte; a one-level model gives both levels its alpha_s/beta_s; "
        "--alpha/--beta set both levels and no shared link, the options below one level). "
        "--bytes LOW..HIGH gives three sizes here (no by-bytes crossovers). Approximation: flat "
        "algorithms are their formula with the messages of the busiest rank that cross "
        "nodes priced between nodes (exact for N, K powers of two, an estimate elsewhere); "
        "hierarchical ones are the sum of their phases, the flat algorithms they run inside "
        "one node and among the N/K node leaders (exact on blocks); others are priced from "
        f"every rank's plan up to {PLAN_MAX_RANKS} ranks. An inter-node message costs "
        "max(α_inter, "
        "c·α_link) + n·max(β_inter, c·β_link), c = ranks of its node crossing at once "
        "(node link shared; 0: never a bottleneck).")
    g.add_argument("--ranks-per-node", type=_ints, metavar="K[,K...]",
                   help="ranks per node (blocks), e.g. 8,16,64: chart flat vs hierarchical "
                        "per K and name where hierarchical overtakes the best flat algorithm")
    g.add_argument("--alpha-intra", type=float, help="seconds per message inside a node")
    g.add_argument("--beta-intra", type=float, help="seconds per byte inside a node")
    g.add_argument("--alpha-inter", type=float, help="seconds per message between nodes")
    g.add_argument("--beta-inter", type=float, help="seconds per byte between nodes")
    g.add_argument("--link-alpha", type=float,
                   help="seconds a message occupies its node's link (shared by the node's "
                        "ranks crossing at once; 0: never a bottleneck)")
    g.add_argument("--link-beta", type=float,
                   help="seconds per byte on a node's link (shared likewise)")
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


def _pingpong(comm, sizes, iters0, peers=None):
    """Mean one-way seconds per size over all concurrent pairs.

    ``peers``: {rank: peer} of the pairs (both directions); default 0-1, 2-3, ...
    Ranks in no pair wait at the barriers.
    """
    rank, n = comm.Get_rank(), comm.Get_size()
    if peers is None:
        peers = {r: r ^ 1 for r in range(n) if r ^ 1 < n}
    peer = peers.get(rank)
    active = peer is not None
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


def level_pairs(lay):
    """The ping-pong pairs of ``fit`` on a layout: (intra, inter, concurrent inter).

    Each is {rank: peer}, or None where the layout has no such pair.

    intra: consecutive ranks of each node paired up (0-1, 2-3 of every node) — on one
    node exactly fit's one-level pairs; inter: the first ranks of nodes 0 and 1;
    concurrent: rank i of node 0 with rank i of node 1, for every i both have (None
    unless that makes two pairs or more).
    """
    def both(pairs):
        d = {}
        for x, y in pairs:
            d[x], d[y] = y, x
        return d or None
    intra = both((m[i], m[i + 1]) for m in lay.members for i in range(0, len(m) - 1, 2))
    inter = conc = None
    if lay.n_nodes > 1:
        a, b = lay.members[0], lay.members[1]
        inter = both([(a[0], b[0])])
        if min(len(a), len(b)) > 1:
            conc = both(zip(a, b, strict=False))
    return intra, inter, conc


#: fit takes the node link as shared when c concurrent pairs are this much slower than one.
LINK_SHARED = 1.1


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


class _PlanPrices:
    """(two-level time, one-level time at intra α/β) of a measured call, from its plans.

    Collective: every rank records its own plan on the run's layout, the ranks'
    sharing of node links and their prices are exchanged (two allgathers), so N
    plans are recorded once, not N times on every rank. None when some rank's
    plan cannot be recorded (the algorithm does more than ctx records). Both
    times without the per-call overhead (:func:`.plancost.plan_time2`).
    """

    def __init__(self, comm, itemsize, root, layout, lv):
        self.comm, self.itemsize, self.root = comm, itemsize, root
        self.layout, self.lv = layout, lv
        self.cache = {}

    def __call__(self, primitive, algorithm, nbytes):
        key = (primitive, algorithm, nbytes)
        if key not in self.cache:
            comm, n, nodes = self.comm, self.comm.Get_size(), self.layout.nodes
            try:
                plan = plan_of(primitive, algorithm, n, comm.Get_rank(),
                               count_of(nbytes, self.itemsize), itemsize=self.itemsize,
                               root=self.root, layout=self.layout)
                flags = node_crossers(plan, nodes)
            except NotSchedulable:
                plan, flags = None, None
            every = comm.allgather(flags)
            if None in every:
                self.cache[key] = None
            else:
                me = nodes[comm.Get_rank()]
                c_out = sum(f[0] for r, f in enumerate(every) if nodes[r] == me)
                c_in = sum(f[1] for r, f in enumerate(every) if nodes[r] == me)
                mine = link_price(plan, self.itemsize, nodes, self.lv, c_out, c_in)
                self.cache[key] = combine(comm.allgather(mine), self.lv.gamma)
        return self.cache[key]


def _levels_note(lay, intra, inter, conc, link):
    """What fit measured at each level, for the model file and the header line."""
    def pairs(d):
        return ", ".join(f"{a}-{b}" for a, b in sorted(d.items()) if a < b)
    return {
        "intra": f"measured: ping-pong of ranks {pairs(intra)} at once (same node)" if intra
        else "not measured: no node has two ranks; intra = inter",
        "inter": f"measured: ping-pong of ranks {pairs(inter)} (nodes 0 and 1)" if inter
        else "not measured: one node, no inter-node pair; inter = intra",
        "link": link,
    }


def fit(args):
    from mpicoll.core.topology import layout as layout_of
    from mpicoll.engine.context import private_comm

    from .harness import Sweep
    from .results import Sink
    from .run import start

    prims, comm, prov = start(args)
    rank, n = comm.Get_rank(), comm.Get_size()
    if n < 2:
        raise SystemExit("fit: needs at least 2 ranks (ping-pong)")
    lay = layout_of(private_comm(comm))
    sizes = size_sweep(8, args.fit_maxbytes, 4)
    intra_p, inter_p, conc_p = level_pairs(lay)
    pp_intra = _pingpong(comm, sizes, 60, intra_p) if intra_p else None
    pp_inter = _pingpong(comm, sizes, 60, inter_p) if inter_p else None
    pp_conc = _pingpong(comm, sizes, 60, conc_p) if conc_p else None
    if pp_intra is not None:
        alpha_i, beta_i = fit_line(sizes, pp_intra)
    if pp_inter is not None:
        alpha_e, beta_e = fit_line(sizes, pp_inter)
    if pp_intra is None:
        alpha_i, beta_i = alpha_e, beta_e
    if pp_inter is None:
        alpha_e, beta_e = alpha_i, beta_i
    link_a = link_b = 0.0
    if pp_conc is not None:
        c = len(conc_p) // 2
        alpha_c, beta_c = fit_line(sizes, pp_conc)
        link_a = alpha_c / c if alpha_c > LINK_SHARED * alpha_e else 0.0
        link_b = beta_c / c if beta_c > LINK_SHARED * beta_e else 0.0
        link = (f"measured: {c} inter-node pairs at once: alpha {alpha_c * 1e6:.3g} us, "
                f"beta {beta_c * 1e9:.3g} ns/B one-way; a shared link where more than "
                f"{LINK_SHARED:g}x one pair's (link_alpha = alpha_c/c, link_beta = beta_c/c), "
                f"else 0")
    else:
        link = "not measured: no two nodes with two ranks each; 0 (never a bottleneck)"
    # One-level alpha/beta: the inter-node link where there is one (see the module doc).
    alpha, beta = (alpha_e, beta_e) if pp_inter is not None else (alpha_i, beta_i)
    pp = pp_inter if pp_inter is not None else pp_intra
    rsizes = [s for s in sizes if s >= 1024]
    red = _reduction(comm, rsizes, 60, args.dtype)
    red_c, gamma = fit_line(rsizes, red)
    overhead = _overhead(comm, args.dtype)
    lv = Levels(alpha_i, beta_i, alpha_e, beta_e, gamma, link_a, link_b, overhead)
    notes = _levels_note(lay, intra_p, inter_p, conc_p, link)
    say = (lambda s: print(s, flush=True)) if rank == 0 else (lambda s: None)
    say(f"# fit on N={n}: alpha = {alpha * 1e6:.2f} us, beta = {beta * 1e9:.4f} ns/B "
        f"({1e-9 / beta if beta else float('inf'):.2f} GB/s), gamma = {gamma * 1e9:.4f} ns/B "
        f"({1e-9 / gamma if gamma else float('inf'):.2f} GB/s, {args.dtype.name} add), "
        f"call overhead o = {overhead * 1e6:.2f} us")
    say(f"# layout: {lay.describe()}")
    say(f"# intra-node: alpha = {alpha_i * 1e6:.2f} us, beta = {beta_i * 1e9:.4f} ns/B "
        f"({notes['intra']})")
    say(f"# inter-node: alpha = {alpha_e * 1e6:.2f} us, beta = {beta_e * 1e9:.4f} ns/B "
        f"({notes['inter']}); link: alpha = {link_a * 1e6:.3g} us, "
        f"beta = {link_b * 1e9:.3g} ns/B ({link})")
    sink = Sink(rank, args.results)
    sink.write(prov)
    args.algorithms, args.progress, args.memcpy = ["all"], "off", False
    sweep = Sweep(args, comm, sink, echo=lambda s: None)
    wrong = sweep.run(prims)
    sink.close()
    rows = []
    prices = _PlanPrices(comm, args.dtype.itemsize, args.root, lay, lv)
    for r in sweep.records:
        prim, alg = r["primitive"], r["algorithm"]
        if alg not in hand_written(prim):
            continue            # native, native[...] and the reference columns: no schedule here
        how = model_of(prim, alg)
        if how == "formula":
            pred = overhead + cost(prim, alg, n, r["call_nbytes"], alpha_i, beta_i, gamma)
            if lay.n_nodes > 1:     # collective: every rank walks the same records in order
                t = prices(prim, alg, r["call_nbytes"])
                if t is None:       # no plan: every message at the inter-node price
                    how = "formula(inter)"
                    pred = overhead + cost(prim, alg, n, r["call_nbytes"], alpha_e, beta_e,
                                           gamma)
                else:
                    pred += t[0] - t[1]
        else:
            t = prices(prim, alg, r["call_nbytes"])
            if t is None:
                how, pred = "none", None
            else:
                pred = overhead + t[0]
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
    if lay.n_nodes > 1:
        say(f"# two levels on {lay.describe()}: every message priced by its link "
            f"(formula at intra-node alpha/beta + what the plans add across nodes; "
            f"mpicoll.bench.plancost.plan_time2)")
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

    def curve(ts):
        return None if ts is None else [{"bytes": s, "one_way_s": t}
                                        for s, t in zip(sizes, ts, strict=False)]
    model = {"type": "model", "alpha_s": alpha, "beta_s_per_byte": beta,
             "gamma_s_per_byte": gamma, "reduce_call_s": red_c, "overhead_s": overhead,
             "alpha_intra_s": alpha_i, "beta_intra_s_per_byte": beta_i,
             "alpha_inter_s": alpha_e, "beta_inter_s_per_byte": beta_e,
             "link_alpha_s": link_a, "link_beta_s_per_byte": link_b,
             "levels": notes,
             "one_level": "alpha_s/beta_s_per_byte: the inter-node values" if pp_inter is not None
             else "alpha_s/beta_s_per_byte: the intra-node values (one node)",
             "layout": {"nodes": list(lay.nodes), "n_nodes": lay.n_nodes,
                        "describe": lay.describe(), "source": lay.source},
             "dtype": args.dtype.name, "nranks": n, "source": "measured by mpicoll.bench fit",
             "pingpong": curve(pp),
             "pingpong_intra": curve(pp_intra), "pingpong_inter": curve(pp_inter),
             "pingpong_inter_concurrent": curve(pp_conc),
             "reduction": [{"bytes": s, "seconds": t} for s, t in zip(rsizes, red, strict=False)],
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
    """``o`` + the algorithm's cost at N ranks and ``nb`` bytes; inf where it is not modelled.

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
    """The model ``predict`` uses: defaults < --model file < command line (see --help)."""
    m = dict(DEFAULT_MODEL)
    if args.model:
        with open(args.model) as f:
            loaded = json.load(f)
        if "alpha_intra_s" not in loaded:        # a one-level model: both levels its alpha/beta
            for key, _ in _LEVEL_KEYS:
                m.pop(key, None)
            m["link_alpha_s"] = m["link_beta_s_per_byte"] = 0.0
        m.update(loaded)
    cli = False
    for k, key in (("alpha", "alpha_s"), ("beta", "beta_s_per_byte"),
                   ("gamma", "gamma_s_per_byte")):
        if getattr(args, k) is not None:
            m[key] = getattr(args, k)
            cli = True
            if k != "gamma":        # a one-level alpha/beta: every link, no shared node link
                for level, one in _LEVEL_KEYS:
                    if one == key:
                        m[level] = m[key]
                m["link_alpha_s"] = m["link_beta_s_per_byte"] = 0.0
    for k, key in (("alpha_intra", "alpha_intra_s"), ("beta_intra", "beta_intra_s_per_byte"),
                   ("alpha_inter", "alpha_inter_s"), ("beta_inter", "beta_inter_s_per_byte"),
                   ("link_alpha", "link_alpha_s"), ("link_beta", "link_beta_s_per_byte")):
        if getattr(args, k, None) is not None:
            m[key] = getattr(args, k)
            cli = True
    for level, one in _LEVEL_KEYS:
        m.setdefault(level, m[one])
    if cli:
        m["source"] = "command line" if not args.model else m["source"] + " + command line"
    return m


def levels_of(m):
    """:class:`~.plancost.Levels` of a model dict (as ``predict`` reads it)."""
    return Levels(m["alpha_intra_s"], m["beta_intra_s_per_byte"], m["alpha_inter_s"],
                  m["beta_inter_s_per_byte"], m["gamma_s_per_byte"],
                  m.get("link_alpha_s", 0.0), m.get("link_beta_s_per_byte", 0.0),
                  m.get("overhead_s", 0.0))


def _node_aware(p, al):
    """Whether the algorithm reads ``ctx.layout`` (node-aware ones carry ``check_layout``)."""
    from mpicoll.core.registry import lookup
    return getattr(lookup(p, al), "check_layout", None) is not None


def model_time2(p, al, N, K, nb, lv):
    """``o`` + the two-level cost at N ranks in blocks of K per node; inf where not modelled.

    See the module doc: :func:`.costs.cost2` for flat algorithms with a formula,
    :func:`.plancost.hierarchical_time` for the node-aware ones, every rank's plan
    on the block layout (up to ``PLAN_MAX_RANKS``) for the others.
    """
    if al == "hierarchical" and p in HIERARCHICAL_PHASES:
        return lv.overhead + hierarchical_time(p, N, K, nb, lv)
    if has_cost(p, al) and has_link_split(p, al):
        return lv.overhead + cost2(p, al, N, K, nb, lv)
    if N > PLAN_MAX_RANKS or not plannable(p, al):
        return math.inf
    if N <= K and not has_cost(p, al):      # one node: the one-level price at intra alpha/beta
        return lv.overhead + plan_cost(p, al, N, nb, lv.alpha_intra, lv.beta_intra, lv.gamma)
    lay = block_layout(N, K)
    # A flat algorithm's plans do not depend on the layout: record them once for every K.
    plans = layout_plans(p, al, N, count_of(nb, 4), 4, lay if _node_aware(p, al) else None)
    t2, t1 = plan_time2(plans, 4, lay.nodes, lv)
    if has_cost(p, al):
        return lv.overhead + cost(p, al, N, nb, lv.alpha_intra, lv.beta_intra, lv.gamma) + t2 - t1
    return lv.overhead + t2


def _two_level_grid(ns, ks):
    """``ns``, thinned above 600 values: ~500 geometric points, powers of two, K·2^j."""
    if len(ns) <= 600:
        return ns
    lo, hi, have = ns[0], ns[-1], set(ns)
    grid = set(np.unique(np.geomspace(lo, hi, 500).astype(int)).tolist()) | {lo, hi}
    grid |= {1 << j for j in range(63) if lo <= 1 << j <= hi}
    grid |= {k << j for k in ks for j in range(63) if lo <= k << j <= hi}
    return sorted(x for x in grid if x in have)


def _families(ns):
    return [(fam, sel) for fam, sel in (("pow2", [N for N in ns if _is_pow2(N)]),
                                        ("other", [N for N in ns if not _is_pow2(N)])) if sel]


def _hier_vs_flat(ns, hier, flats):
    """Segments of {'hierarchical', 'flat'} over ``ns`` per family, with the flat overtaken.

    For each hierarchical segment, the flat algorithm it overtakes (the best flat one at
    its first N).
    """
    out = {}
    best = [min(flats, key=lambda a: flats[a][i]) for i in range(len(ns))]
    for fam, sel in _families(ns):
        idx = [ns.index(N) for N in sel]
        th = [hier[i] for i in idx]
        tf = [flats[best[i]][i] for i in idx]
        if not any(math.isfinite(t) for t in th):
            continue
        segs = crossovers(sel, {"flat": tf, "hierarchical": th})
        over = {s[0]: best[ns.index(s[0])] for s in segs if s[2] == "hierarchical"}
        out[fam] = {"segments": segs, "crossovers": [s[0] for s in segs[1:]],
                    "overtakes": over}
    return out


def predict_two_level(args, m, ns, byte_vals, prims):
    """``predict --ranks-per-node``: flat vs node-aware per K (see the module doc)."""
    lv = levels_of(m)
    ks = args.ranks_per_node
    grid = _two_level_grid(ns, ks)
    print(f"# two-level model ({m['source']}): intra-node alpha = {lv.alpha_intra * 1e6:.3g} us, "
          f"beta = {lv.beta_intra * 1e9:.3g} ns/B; inter-node alpha = "
          f"{lv.alpha_inter * 1e6:.3g} us, beta = {lv.beta_inter * 1e9:.3g} ns/B; node link "
          f"alpha = {lv.link_alpha * 1e6:.3g} us, beta = {lv.link_beta * 1e9:.3g} ns/B; "
          f"gamma = {lv.gamma * 1e9:.3g} ns/B, per-call overhead = {lv.overhead * 1e6:.3g} us")
    print("# N ranks in blocks of K per node. Flat algorithms: formula with the busiest rank's "
          "inter-node messages priced between nodes (exact for N, K powers of two); "
          "hierarchical: intra phases on K ranks + the inter phase on N/K leaders "
          "(mpicoll.bench.model docstring)")
    if len(grid) < len(ns):
        print(f"# ranks grid thinned to {len(grid)} of {len(ns)} values (geometric, powers of "
              f"two, K * 2^j): crossovers to within ~2% of N")
    print("# winner per range of N (powers of two apart); 'hierarchical vs best flat': where "
          "the node-aware algorithm beats every flat one; ties within 1% keep the previous")
    out = {"model": {k: m[k] for k in ("alpha_s", "beta_s_per_byte", "gamma_s_per_byte",
                                       "alpha_intra_s", "beta_intra_s_per_byte",
                                       "alpha_inter_s", "beta_inter_s_per_byte", "source")},
           "ranks_per_node": ks, "nranks": grid, "two_level": {}}
    out["model"].update(link_alpha_s=lv.link_alpha, link_beta_s_per_byte=lv.link_beta,
                        overhead_s=lv.overhead)
    # Every K of one (primitive, algorithm, n, N) at once: a plan set is recorded once.
    all_times = {}
    for p in prims:
        for nb in (byte_vals if p != "barrier" else [0]):
            for al in hand_written(p):
                rows = [[model_time2(p, al, N, K, nb, lv) for K in ks] for N in grid]
                for j, K in enumerate(ks):
                    all_times[K, p, nb, al] = [row[j] for row in rows]
    for K in ks:
        print(f"### K = {K} ranks per node")
        per_k = out["two_level"][str(K)] = {"primitives": {}}
        reps = sorted({K << (2 * j) for j in range(40) if grid[0] <= K << (2 * j) <= grid[-1]}
                      | {grid[-1]})
        for p in prims:
            algs = [al for al in hand_written(p)]
            flat = [al for al in algs if al != "hierarchical"]
            res = per_k["primitives"][p] = {"by_ranks": []}
            print(f"## {p}, K = {K}")
            nb0 = byte_vals[0] if p != "barrier" else 0
            left = [al for al in algs if not math.isfinite(all_times[K, p, nb0, al][-1])]
            if left:
                print(f"# {p}: {', '.join(left)}: no formula and no phase model; priced from "
                      f"every rank's plan up to N = {PLAN_MAX_RANKS} only")
            for nb in (byte_vals if p != "barrier" else [0]):
                times = {al: all_times[K, p, nb, al] for al in algs}
                entry = {"bytes": nb}
                for fam, sel in _families(grid):
                    idx = [grid.index(N) for N in sel]
                    segs = crossovers(sel, {al: [times[al][i] for i in idx] for al in algs})
                    entry[fam] = {"segments": segs, "crossovers": [s[0] for s in segs[1:]]}
                    label = "N = 2^k" if fam == "pow2" else "other N"
                    cross = ", ".join(str(s[0]) for s in segs[1:]) or "none"
                    print(f"  n = {fmt_size(nb)}, {label}: {_fmt_segs(segs)}  "
                          f"(crossovers: {cross})")
                entry["crossovers"] = sorted({x for fam, _ in _families(grid)
                                              for x in entry[fam]["crossovers"]})
                if "hierarchical" in algs and flat:
                    hv = _hier_vs_flat(grid, times["hierarchical"], {al: times[al] for al in flat})
                    table = []
                    for N in reps:
                        i = grid.index(N)
                        bf = min(flat, key=lambda a: times[a][i])
                        th, tf = times["hierarchical"][i], times[bf][i]
                        table.append({"nranks": N, "best_flat": bf, "best_flat_us": tf * 1e6,
                                      "hierarchical_us": th * 1e6,
                                      "speedup": tf / th if th > 0 else None})
                    hv["table"] = table
                    entry["hierarchical_vs_flat"] = hv
                    for fam, v in hv.items():
                        if fam == "table":
                            continue
                        label = "N = 2^k" if fam == "pow2" else "other N"
                        wins = [f"N = {x} (over {al})" for x, al in v["overtakes"].items()]
                        print(f"  n = {fmt_size(nb)}, hierarchical vs best flat, {label}: "
                              f"{_fmt_segs(v['segments'])}  (hierarchical wins from: "
                              f"{', '.join(wins) or 'never'}; crossovers: "
                              f"{', '.join(map(str, v['crossovers'])) or 'none'})")
                    print(f"  n = {fmt_size(nb)}, best flat / hierarchical: " + ", ".join(
                        f"N={t['nranks']} {t['speedup']:.2f}x ({t['best_flat']})"
                        for t in table if t["speedup"] is not None))
                res["by_ranks"].append(entry)
                if args.output:
                    res.setdefault("_curves", {})[nb] = {al: _nan_for_inf(ts)
                                                         for al, ts in times.items()}
    if args.output:
        from .plot import plot_two_level
        plot_two_level(out, grid, args.output)
        print(f"# chart written to {args.output}")
    if args.json:
        for per_k in out["two_level"].values():
            for res in per_k["primitives"].values():
                res.pop("_curves", None)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


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
        sorted({bytes_spec[0], int(math.sqrt(max(bytes_spec[0], 1) * bytes_spec[1])),
                bytes_spec[1]})
    prims = list(PRIMITIVES) if args.primitive == ["all"] else args.primitive
    for p in prims:
        if p not in PRIMITIVES:
            raise SystemExit(f"--primitive: unknown primitive {p!r}")
    if getattr(args, "ranks_per_node", None):
        return predict_two_level(args, m, ns, byte_vals, prims)
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
            reps = sorted({ns[0], ns[-1]}
                          | {8 ** k for k in range(1, 8) if ns[0] < 8 ** k < ns[-1]})
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
