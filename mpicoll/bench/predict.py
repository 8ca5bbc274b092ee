"""``predict``: chart the model per algorithm over N and bytes, and name crossovers.

One level (α, β, γ), or two (``--ranks-per-node``: N ranks in blocks of K per
node, flat against node-aware algorithms). How each algorithm is priced is
told in :mod:`mpicoll.bench.model` (the commands' doc).
"""
import json
import math

import numpy as np

from mpicoll import algorithms
from mpicoll.calls import DEFINED
from mpicoll.coll.hierarchical import split_of
from mpicoll.core.plugins import PluginError, import_modules
from mpicoll.core.registry import PRIMITIVES

from .formula_prices import cost, cost2, has_cost, has_link_split
from .plan_prices import (
    PLAN_MAX_RANKS,
    Levels,
    block_layout,
    count_of,
    hierarchical_time,
    layout_plans,
    model_of,
    plan_cost,
    plan_time2,
    plannable,
)
from .units import fmt_size, parse_range

__all__ = ["predict", "predict_two_level", "crossovers", "DEFAULT_MODEL", "levels_of",
           "model_time", "model_time2", "modelled", "rank_segments", "hand_written"]

#: Illustrative parameters used by ``predict`` without --model (not measured).
DEFAULT_MODEL = {"alpha_s": 2e-6, "beta_s_per_byte": 1 / 10e9, "gamma_s_per_byte": 1 / 5e9,
                 "overhead_s": 0.0, "source": "illustrative defaults (not measured)",
                 "alpha_intra_s": 0.4e-6, "beta_intra_s_per_byte": 1 / 25e9,
                 "alpha_inter_s": 2e-6, "beta_inter_s_per_byte": 1 / 10e9,
                 "link_alpha_s": 0.5e-6, "link_beta_s_per_byte": 1 / 12.5e9}

#: Two-level keys of a model, and the one-level key each falls back to.
_LEVEL_KEYS = (("alpha_intra_s", "alpha_s"), ("beta_intra_s_per_byte", "beta_s_per_byte"),
               ("alpha_inter_s", "alpha_s"), ("beta_inter_s_per_byte", "beta_s_per_byte"))



def _moves_data(primitive):
    """False for a primitive that moves no data (barrier: priced at 0 bytes only)."""
    defined = DEFINED.get(primitive)
    return defined is None or defined.count_kind is not None

def hand_written(primitive):
    """The registered algorithms of ``primitive`` that mpicoll runs itself (native excluded)."""
    return [a for a in algorithms(primitive) if a != "native"]


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
    if not algs:            # nothing priced here (plans stop at PLAN_MAX_RANKS): no winner
        return segs
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
    lines = [f"# {p}: {', '.join(lost)}: no declared formula and no plan to "
             f"read one from (the algorithm does more than ctx records); left out"] if lost else []
    if not planned:
        return "\n".join(lines), planned
    what = ", ".join(planned)
    text = f"# {p}: {what}: no declared formula; modelled from the recorded plans"
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
    """:class:`~.plan_prices.Levels` of a model dict (as ``predict`` reads it)."""
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

    See the module doc: :func:`.formula_prices.cost2` for flat algorithms with a formula,
    :func:`.plan_prices.hierarchical_time` for the node-aware ones, every rank's plan
    on the block layout (up to ``PLAN_MAX_RANKS``) for the others.
    """
    if al == "hierarchical" and split_of(p) is not None:
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
        for nb in (byte_vals if _moves_data(p) else [0]):
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
            nb0 = byte_vals[0] if _moves_data(p) else 0
            left = [al for al in algs if not math.isfinite(all_times[K, p, nb0, al][-1])]
            if left:
                print(f"# {p}: {', '.join(left)}: no formula and no phase model; priced from "
                      f"every rank's plan up to N = {PLAN_MAX_RANKS} only")
            for nb in (byte_vals if _moves_data(p) else [0]):
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
    """``predict``: the model's best algorithm over N (and bytes), crossovers, charts."""
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
        for nb in (byte_vals if _moves_data(p) else [0]):
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
        if _moves_data(p) and not isinstance(bytes_spec, list):
            bgrid = _bytes_grid(bytes_spec)
            reps = sorted({ns[0], ns[-1]}
                          | {8 ** k for k in range(1, 8) if ns[0] < 8 ** k < ns[-1]})
            for N in reps:
                times = {al: [model_time(p, al, N, x, params) for x in bgrid]
                         for al in hand_written(p) if modelled(p, al, N)}
                segs = crossovers(bgrid, times)
                res["by_bytes"].append({"nranks": N, "segments": segs,
                                        "crossovers": [s[0] for s in segs[1:]]})
                if not segs:
                    print(f"  N = {N}: no algorithm priced (no formula, and plans are "
                          f"priced up to N = {PLAN_MAX_RANKS} only)")
                    continue
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

