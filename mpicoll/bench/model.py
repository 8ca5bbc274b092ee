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
  formula (:mod:`.formula_prices`) costs o + formula(α_intra, β_intra, γ) plus, on two
  nodes or more, what its recorded plans add when every message is priced by
  its link (:func:`.plan_prices.plan_time2` minus the same at α_intra, β_intra);
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

- a flat algorithm with a formula costs :func:`.formula_prices.cost2`: its formula
  at intra-node α, β plus, for the messages of its busiest rank that cross
  nodes (:func:`.formula_prices.link_split`, from its message pattern on blocks),
  the inter-node price instead — exact against pricing every rank's plan
  where N and K are powers of two, an estimate elsewhere (a step counts as
  crossing when any of its pairs does);
- a node-aware algorithm costs its phases (:func:`.plan_prices.hierarchical_time`):
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
without a formula in :mod:`.formula_prices` is modelled from its recorded plans
(:mod:`.plan_prices`, model ``plan``); ``predict`` reads plans up to
``PLAN_MAX_RANKS`` ranks and says which algorithms it left out above that.

Here: the two commands' arguments (:func:`add_parsers`). ``fit`` lives in
:mod:`.fit`, ``predict`` and the model's prices in :mod:`.predict`; their
public names are re-exported here.
"""
from .fit import LINK_SHARED, fit, fit_line, level_pairs  # noqa: F401
from .plan_prices import PLAN_MAX_RANKS
from .predict import (  # noqa: F401
    DEFAULT_MODEL,
    crossovers,
    hand_written,
    levels_of,
    model_time,
    model_time2,
    modelled,
    predict,
    predict_two_level,
    rank_segments,
)
from .units import parse_size

__all__ = ["add_parsers", "fit_line", "crossovers", "DEFAULT_MODEL", "levels_of",
           "model_time2", "predict_two_level"]


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
