"""``fit``: measure α, β (inside and between nodes), γ and the call overhead here.

Then a small sweep of each algorithm, predicted against measured. What it
measures, and how, is told in :mod:`mpicoll.bench.model` (the commands' doc).
"""
import json
import time

import numpy as np

from mpicoll.sched.inspect import plan_of
from mpicoll.sched.plan import NotSchedulable

from .formula_prices import cost
from .plan_prices import Levels, combine, count_of, link_price, model_of, node_crossers
from .predict import hand_written
from .units import iterations, size_sweep

__all__ = ["fit", "fit_line", "level_pairs", "LINK_SHARED"]


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


class _PlanPrices:
    """(two-level time, one-level time at intra α/β) of a measured call, from its plans.

    Collective: every rank records its own plan on the run's layout, the ranks'
    sharing of node links and their prices are exchanged (two allgathers), so N
    plans are recorded once, not N times on every rank. None when some rank's
    plan cannot be recorded (the algorithm does more than ctx records). Both
    times without the per-call overhead (:func:`.plan_prices.plan_time2`).
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
    """``fit`` (under MPI): measure the model here and compare it with a sweep."""
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
            f"mpicoll.bench.plan_prices.plan_time2)")
    planned = sorted({f"{r['primitive']}/{r['algorithm']}" for r in rows if r["model"] == "plan"})
    if planned:
        say(f"# model plan (no declared formula): {', '.join(planned)}, "
            f"predicted from the recorded plans (busiest rank's messages, bytes moved and "
            f"bytes reduced; mpicoll.bench.plan_prices)")
    unmodelled = sorted({f"{r['primitive']}/{r['algorithm']}" for r in rows
                         if r["model"] == "none"})
    if unmodelled:
        say(f"# model none: {', '.join(unmodelled)}: no declared formula and no "
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
