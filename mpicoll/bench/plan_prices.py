"""A cost read off an algorithm's recorded plans: the model of algorithms without a formula.

:mod:`.formula_prices` holds each built-in algorithm's α-β-γ formula as its docstring
states it. An algorithm registered without one (a plug-in, a new one) is not
left out of ``fit`` and ``predict``: its cost is taken from the plans
:func:`mpicoll.sched.inspect.plan_of` records for every rank, as the busiest
rank's load::

    cost = M α + B β + R γ

- M: the most messages one rank handles, a ``sendrecv`` counting once (its
  send and receive overlap) and every other send or receive once each;
- B: the most bytes one rank moves (a ``sendrecv``: the larger of its halves);
- R: the most bytes one rank reduces.

Each maximum is over the ranks separately. At powers of two it gives the
built-in formulas of :mod:`.formula_prices` (tests/test_registry.py checks that) but
the pipeline's, whose fill time is waiting along a chain of ranks, which a
per-rank load does not see.

Two levels (:func:`link_price`, :func:`plan_time2`): on a node
:class:`~mpicoll.core.topology.Layout` every message is priced by its link.
A message to or from a rank of the same node costs α_intra + s·β_intra; one
that crosses nodes costs ``max(α_inter, c·α_link) + s·max(β_inter, c·β_link)``,
where c is the number of ranks of this rank's node that send (for a send)
or receive (for a receive) across nodes during the call: the node's link is
shared by them (:class:`Levels`; α_link = β_link = 0, the default, is a
link that is never the bottleneck). A ``sendrecv`` costs the larger of its
halves (α and β parts separately). Then, as above, the maxima over ranks of
the α part, the β part and the bytes reduced, each taken separately::

    time = max_r A_r + max_r B_r + max_r R_r · γ

With α_intra = α_inter, β_intra = β_inter and no link terms this is exactly
the one-level :func:`plan_cost` at those α, β (same sums in the same order).
"""
from functools import cache, lru_cache
from typing import NamedTuple

from mpicoll.coll.hierarchical import split_of
from mpicoll.sched.inspect import plan_of
from mpicoll.sched.plan import IRECV, ISEND, RECV, REDUCE, SEND, SENDRECV, NotSchedulable

from .formula_prices import cost, has_cost

__all__ = ["load", "busiest", "plan_cost", "model_cost", "model_of", "plannable",
           "PLAN_MAX_RANKS", "count_of", "Levels", "link_price", "node_crossers", "Messages",
           "messages_of",
           "plan_time2", "layout_plans", "block_layout", "hierarchical_time",
           "hierarchical_inter"]

#: ``predict`` reads plans up to this N: recording every rank's plan costs O(N) plans of
#: up to O(N) operations each (seconds per point beyond a few hundred ranks).
PLAN_MAX_RANKS = 64


def load(plan, itemsize):
    """(messages, bytes moved, bytes reduced) of one rank's plan (see the module doc)."""
    msgs = moved = reduced = 0
    for op in plan.ops:
        kind = op[0]
        if kind in (SEND, RECV, ISEND, IRECV):
            msgs += 1
            moved += op[1].size
        elif kind == SENDRECV:
            msgs += 1
            moved += max(op[1].size, op[3].size)
        elif kind == REDUCE:
            reduced += op[1].size
    return msgs, moved * itemsize, reduced * itemsize


def count_of(nbytes, itemsize):
    """Elements of ``nbytes`` (at least one when nbytes > 0), as the bench lays out a size."""
    return max(1, nbytes // itemsize) if nbytes else 0


@lru_cache(maxsize=8192)
def busiest(primitive, algorithm, nranks, count, itemsize):
    """(M, B, R): the maxima over the ranks of :func:`load`, for one call.

    ``count`` in :func:`~mpicoll.sched.inspect.plan_of`'s unit (the vector,
    one rank's block, or reduce_scatter's total).
    """
    loads = [load(plan_of(primitive, algorithm, nranks, r, count, itemsize=itemsize), itemsize)
             for r in range(nranks)]
    return tuple(max(x[i] for x in loads) for i in range(3))


@cache
def plannable(primitive, algorithm):
    """Whether the algorithm records as a plan (one that does more than ``ctx`` does not).

    Tried on every rank of N = 3 and N = 4 with a few elements: what the
    algorithm does beyond ``ctx`` shows there as it would at any size.
    """
    try:
        for n in (3, 4):
            for r in range(n):
                plan_of(primitive, algorithm, n, r, 2 * n)
    except NotSchedulable:
        return False
    return True


def plan_cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma, itemsize=4):
    """Predicted seconds of one call from the plans (``nbytes`` in the costs' unit)."""
    m, b, r = busiest(primitive, algorithm, nranks, count_of(nbytes, itemsize), itemsize)
    return m * alpha + b * beta + r * gamma


def model_of(primitive, algorithm):
    """``"formula"`` (a declared cost, :mod:`.formula_prices`) or ``"plan"`` (its plans)."""
    return "formula" if has_cost(primitive, algorithm) else "plan"


def model_cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma, itemsize=4):
    """The formula when the algorithm has one, else :func:`plan_cost`."""
    if has_cost(primitive, algorithm):
        return cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma)
    return plan_cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma, itemsize)


# -- two levels --------------------------------------------------------------

class Levels(NamedTuple):
    """The two-level model's parameters (seconds, seconds per byte).

    ``link_alpha``/``link_beta``: per message / per byte that a node's
    inter-node link is busy, shared by the node's ranks that cross nodes at
    once (0: the link is never the bottleneck, every message costs α/β of its
    pair of ranks alone).
    """

    alpha_intra: float
    beta_intra: float
    alpha_inter: float
    beta_inter: float
    gamma: float
    link_alpha: float = 0.0
    link_beta: float = 0.0
    overhead: float = 0.0

    def inter(self, c=1):
        """(α, β) of an inter-node message whose node link is shared by ``c`` ranks."""
        return max(self.alpha_inter, c * self.link_alpha), max(self.beta_inter, c * self.link_beta)


def _halves(op):
    """((elements, peer, is_send), ...) of a message operation; () for the others."""
    kind = op[0]
    if kind in (SEND, ISEND):
        return ((op[1].size, op[2], True),)
    if kind in (RECV, IRECV):
        return ((op[1].size, op[2], False),)
    if kind == SENDRECV:
        return ((op[1].size, op[2], True), (op[3].size, op[4], False))
    return ()


class Messages(NamedTuple):
    """What pricing reads of one rank's plan: its messages' halves and elements reduced."""

    rank: int
    ops: tuple          # per message operation: ((elements, peer, is_send), ...)
    reduced: int


def messages_of(plan):
    """The :class:`Messages` of a :class:`~mpicoll.sched.plan.Plan` (or itself)."""
    if isinstance(plan, Messages):
        return plan
    ops, reduced = [], 0
    for op in plan.ops:
        if op[0] == REDUCE:
            reduced += op[1].size
        else:
            h = _halves(op)
            if h:
                ops.append(h)
    return Messages(plan.rank, tuple(ops), reduced)


def node_crossers(plan, nodes):
    """(sends across nodes?, receives across nodes?) of one rank's plan."""
    plan = messages_of(plan)
    me = nodes[plan.rank]
    out = inn = False
    for halves in plan.ops:
        for _, peer, is_send in halves:
            if nodes[peer] != me:
                if is_send:
                    out = True
                else:
                    inn = True
    return out, inn


def _sharing(flags, nodes):
    """Per node: (ranks that send across nodes, ranks that receive across nodes)."""
    c = {}
    for r, (out, inn) in enumerate(flags):
        co, ci = c.get(nodes[r], (0, 0))
        c[nodes[r]] = (co + out, ci + inn)
    return c


def link_price(plan, itemsize, nodes, lv, c_out=1, c_in=1):
    """(A1, A2, B1, B2, R) of one rank's plan on the node map ``nodes`` (node of each rank).

    A1, B1: the α and β parts of the one-level :func:`load` at (α_intra,
    β_intra); A2, B2: the same with every message priced by its link (see
    the module doc; ``c_out``/``c_in``: the ranks of this rank's node that
    send / receive across nodes). R: bytes reduced. A2 - A1 and B2 - B1 are
    sums of (price - intra price) over the messages that cross nodes, so they
    are exactly 0.0 when the levels are equal.
    """
    plan = messages_of(plan)
    ai, bi = lv.alpha_intra, lv.beta_intra
    ao, bo = lv.inter(c_out)
    an, bn = lv.inter(c_in)
    me = nodes[plan.rank]
    moved = 0
    extra_a = extra_b = 0.0
    for halves in plan.ops:
        if len(halves) == 1:
            size, peer, is_send = halves[0]
            big = size * itemsize
            moved += big
            if nodes[peer] != me:
                a, b = (ao, bo) if is_send else (an, bn)
                extra_a += a - ai
                extra_b += big * b - big * bi
            continue
        big = max(h[0] for h in halves) * itemsize
        moved += big
        if all(nodes[peer] == me for _, peer, _ in halves):
            continue
        pa = pb = 0.0
        for size, peer, is_send in halves:
            if nodes[peer] == me:
                a, b = ai, bi
            else:
                a, b = (ao, bo) if is_send else (an, bn)
            pa = max(pa, a)
            pb = max(pb, size * itemsize * b)
        extra_a += pa - ai
        extra_b += pb - big * bi
    msgs = len(plan.ops)
    return (msgs * ai, msgs * ai + extra_a, moved * bi, moved * bi + extra_b,
            plan.reduced * itemsize)


def plan_time2(plans, itemsize, nodes, lv):
    """Two-level seconds of one call from every rank's plan: (time, one_level_time_at_intra).

    ``nodes``: the node of each rank (a :class:`~mpicoll.core.topology.Layout`'s ``nodes``).
    Both without the per-call overhead.
    """
    c = _sharing([node_crossers(p, nodes) for p in plans], nodes)
    prices = [link_price(p, itemsize, nodes, lv, *c[nodes[p.rank]]) for p in plans]
    return combine(prices, lv.gamma)


def combine(prices, gamma):
    """(two-level time, one-level time) from the ranks' :func:`link_price` tuples."""
    a1, a2, b1, b2, r = (max(x[i] for x in prices) for i in range(5))
    return a2 + b2 + r * gamma, a1 + b1 + r * gamma


def block_layout(nranks, per_node):
    """The :class:`~mpicoll.core.topology.Layout` of ``nranks`` ranks in blocks of ``per_node``."""
    from mpicoll.core.topology import Layout
    return Layout([r // per_node for r in range(nranks)], f"blocks of {per_node}")


@lru_cache(maxsize=1024)
def layout_plans(primitive, algorithm, nranks, count, itemsize, layout):
    """Every rank's :class:`Messages` of one call on ``layout``, cached.

    ``layout``: a hashable Layout, or None for one node.
    """
    return tuple(messages_of(plan_of(primitive, algorithm, nranks, r, count, itemsize=itemsize,
                                     layout=layout)) for r in range(nranks))


# -- node-aware algorithms by phases -------------------------------------------

def hierarchical_inter(primitive, nbytes):
    """(primitive, algorithm) the node leaders run by default for a call of ``nbytes`` per rank.

    ``nbytes`` as the algorithm sees it (the vector; allgather: one rank's block).
    """
    fn = split_of(primitive).default(nbytes, True)
    return fn.primitive, fn.algorithm


def _one_level(primitive, algorithm, nranks, nbytes, alpha, beta, gamma, itemsize):
    if has_cost(primitive, algorithm):
        return cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma)
    if nranks > PLAN_MAX_RANKS or not plannable(primitive, algorithm):
        return float("inf")
    return plan_cost(primitive, algorithm, nranks, nbytes, alpha, beta, gamma, itemsize)


def hierarchical_time(primitive, nranks, per_node, nbytes, lv, itemsize=4):
    """Seconds of the node-aware algorithm on ``nranks`` in blocks of ``per_node``, by phases.

    intra phase(s) on L = min(K, N) ranks at (α_intra, β_intra) + the inter
    phase on M = ⌈N/K⌉ leaders at (max(α_inter, α_link), max(β_inter,
    β_link)) — one rank per node crosses, so a node's link carries one rank's
    messages — + the closing intra phase; each phase is the one-level model
    (formula, else plans) of the flat algorithm the node-aware one runs on
    that group (its defaults: binomial inside nodes, the inter algorithm
    chosen by size), as the algorithm's :class:`~mpicoll.coll.hierarchical.NodeSplit`
    declares them. An inter phase of node blocks (allgather's allgatherv) is
    priced as the primitive's algorithm of the same name with K blocks per node. Exact
    for the plan model on blocks of equal nodes where the phases' formulas
    are (N, K powers of two; tests/test_model_two_level.py); with a shorter
    last node the largest node's intra phases are counted.
    """
    split = split_of(primitive)
    if split is None:
        raise KeyError(f"no node-aware phase model for {primitive}")
    N, K = nranks, per_node
    L, M = min(K, N), -(-N // K)
    count = count_of(nbytes, itemsize)
    ai, bi, g = lv.alpha_intra, lv.beta_intra, lv.gamma
    total = 0.0
    if split.first:
        total += _one_level(split.first, "binomial", L, nbytes, ai, bi, g, itemsize)
    if M > 1:
        ip, ia = hierarchical_inter(primitive, count * itemsize)
        ae, be = lv.inter(1)
        if split.blocks:
            total += _one_level(primitive, ia, M, K * nbytes, ae, be, g, itemsize)
        else:
            total += _one_level(ip, ia, M, nbytes, ae, be, g, itemsize)
    if split.last:
        total += _one_level(split.last, "binomial", L, N * nbytes if split.blocks else nbytes,
                            ai, bi, g, itemsize)
    return total
