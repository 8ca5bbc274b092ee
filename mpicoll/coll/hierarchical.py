"""Node-aware (hierarchical) algorithms: inside each node, between nodes, inside again.

Where a message between nodes costs far more than one inside a node, the
flat algorithms pay the expensive link on most of their steps. These run in
three phases, as MPICH's and Open MPI's (HAN) node-aware collectives do:

1. *intra*: the ranks of each node combine (reduce) or collect (gather)
   their data at one rank of the node, its *head* — the node's lowest rank,
   or the root when the root is on that node;
2. *inter*: the heads, one per node, run an existing flat algorithm among
   themselves — only this phase crosses nodes;
3. *intra*: each head hands the result to its node (broadcast).

Every phase is an ordinary flat algorithm run on a :class:`Group`, a view
of the call's ``ctx`` restricted to some ranks, so the phases record into
one plan and run on every engine (blocking, nonblocking, persistent, device
transports) unchanged. Each algorithm declares its split on its register
(:class:`NodeSplit`: its intra phases, its default inter algorithms, whether it
has a root): its declared cost, the demo's description and the bench's model
by phases are read off it. The nodes come from ``ctx.layout``
(:mod:`mpicoll.core.topology`: ``Split_type(COMM_TYPE_SHARED)``, or
``MPICOLL_NODES`` to simulate nodes on one machine).

Options, as ``"hierarchical:inter=ring,intra=linear"`` wherever an algorithm
is named (``algorithm=``, ``P2PComm(comm, allreduce=...)``,
``MPICOLL_ALLREDUCE_ALGORITHM``, the bench's ``--algorithms``):

- ``inter``: the flat algorithm among heads (allreduce/bcast/reduce: that
  primitive's algorithms; allgather: an ``allgatherv`` algorithm). Default:
  chosen by message size (latency-bound below 64 KiB, bandwidth-bound above).
- ``intra``: ``binomial`` (default), ``linear`` or ``shm``, for every intra
  phase. ``shm``: the node's ranks read each other's memory
  (:mod:`mpicoll.coll.shm`; only the ranks of one node share memory, simulated
  nodes included): host arrays only, and no plan (the call runs directly).

Costs, with L the largest number of ranks on a node, M the number of nodes,
α/β/γ inside a node and α'/β' between nodes, n bytes per rank: an intra
phase is ⌈log2 L⌉ steps (binomial), or 2-3 node synchronisations and one
read of each byte that moves (shm), the inter phase is the inter algorithm's
cost on M ranks at α', β'. Non-commutative ops keep rank order when nodes
are blocks of consecutive ranks; on other placements they are refused.
"""
from ..core.errors import ArgumentError
from ..core.registry import algorithms, lookup, register, table
from .allgatherv import allgatherv_bruck, allgatherv_ring
from .allreduce import allreduce_rabenseifner, allreduce_recursive_doubling
from .bcast import bcast_binomial, bcast_linear, bcast_scatter_allgather, binomial_bcast
from .cost import Call, Phases
from .gather import binomial_gather, gather_binomial, gather_linear
from .reduce import binomial_reduce, reduce_binomial, reduce_linear, reduce_rabenseifner
from .shm import bcast_shm, gather_shm, reduce_shm

__all__ = ["Group", "SMALL", "NodeSplit", "split_of", "phases", "default_inter"]

#: Below this many bytes per rank the default inter algorithm is latency-bound.
SMALL = 64 * 1024

#: The function each ``intra`` option runs for each intra phase. Keyed by the phases'
#: primitives (reduce, bcast, gather: what a :class:`NodeSplit`'s ``first``/``last`` name),
#: not by the node-aware algorithms': an option names one family of flat algorithms, and a
#: phase takes its member for that primitive.
_INTRA = {
    "binomial": {"reduce": binomial_reduce, "bcast": binomial_bcast, "gather": binomial_gather},
    "linear": {"reduce": reduce_linear, "bcast": bcast_linear, "gather": gather_linear},
    # each node's ranks read each other's memory (host arrays; the node's ranks only)
    "shm": {"reduce": reduce_shm, "bcast": bcast_shm, "gather": gather_shm},
}


class Group:
    """``ctx`` seen by the ranks ``members`` only (a sub-communicator without MPI calls).

    ``rank``/``size`` are positions in ``members``; peers are translated to
    the call's ranks, so a flat algorithm runs on the group unchanged and
    its messages keep the call's communicator and tag (phases run in order,
    and MPI keeps messages between two ranks in order, so they never mix).
    """

    __slots__ = ("ctx", "members", "rank", "size")

    def __init__(self, ctx, members):
        self.ctx = ctx
        self.members = members
        self.rank = members.index(ctx.rank)
        self.size = len(members)

    op = property(lambda self: self.ctx.op)
    like = property(lambda self: self.ctx.like)
    tag = property(lambda self: self.ctx.tag)

    def send(self, buf, dest):
        """Send ``buf`` to group rank ``dest``."""
        self.ctx.send(buf, self.members[dest])

    def recv(self, buf, source):
        """Receive into ``buf`` from group rank ``source``."""
        self.ctx.recv(buf, self.members[source])

    def sendrecv(self, sendbuf, dest, recvbuf, source):
        """Send ``sendbuf`` to group rank ``dest``, receive into ``recvbuf`` from ``source``."""
        self.ctx.sendrecv(sendbuf, self.members[dest], recvbuf, self.members[source])

    def isend(self, buf, dest):
        """Post a send of ``buf`` to group rank ``dest``; the request."""
        return self.ctx.isend(buf, self.members[dest])

    def irecv(self, buf, source):
        """Post a receive into ``buf`` from group rank ``source``; the request."""
        return self.ctx.irecv(buf, self.members[source])

    def waitall(self, requests):
        """Complete ``requests`` (from isend/irecv); received data is then in place."""
        self.ctx.waitall(requests)

    def wait(self, request):
        """Complete ``request`` (as :meth:`waitall`)."""
        self.ctx.waitall([request])

    def scratch(self, n):
        """A scratch vector of ``n`` elements in the call's dtype and memory."""
        return self.ctx.scratch(n)

    def copy(self, dst, src):
        """``dst[...] = src``, as the call's ``ctx.copy``."""
        self.ctx.copy(dst, src)

    def reduce(self, lower, higher, out):
        """``lower (op) higher`` with the call's op; returns the array holding the result."""
        return self.ctx.reduce(lower, higher, out)

    # what the shm algorithms use: the memory of the group's node (its ranks only)
    @property
    def node_memory(self):
        """The shared memory of the group's node as a callable (its ranks only); None in a plan."""
        node_memory = getattr(self.ctx, "node_memory", None)
        if node_memory is None:        # recording a plan: the shm phases have none
            return None
        members = self.members
        return lambda: node_memory(members)

    def read_from(self, peers, q, i, lo, hi, dst=None, dtype=None):
        """Elements ``[lo, hi)`` of array ``i`` of node rank ``q``, as ``ctx.read_from``."""
        return self.ctx.read_from(peers, q, i, lo, hi, dst, dtype)

    def read_box(self, box, q, k, lo, hi, dtype):
        """Bytes ``[lo, hi)`` of node rank ``q``'s mailbox slot ``k``, as ``ctx.read_box``."""
        return self.ctx.read_box(box, q, k, lo, hi, dtype)

    def set_path(self, path):
        """Name the path of this call's data in the traffic record, as ``ctx.set_path``."""
        self.ctx.set_path(path)


def _heads(lay, root):
    """Each node's head: its lowest rank, or ``root`` on the root's node."""
    heads = list(lay.leaders)
    if root is not None:
        heads[lay.nodes[root]] = root
    return heads


def _local(ctx, lay):
    return Group(ctx, lay.members[lay.nodes[ctx.rank]])


# -- declared costs: the flat algorithms' own, phase by phase -----------------

#: The registered flat algorithm of each intra phase (their declared costs), keyed as
#: :data:`_INTRA`; ``shm`` has none (its phases run directly, without a plan).
_INTRA_COST = {
    "binomial": {"reduce": reduce_binomial, "bcast": bcast_binomial, "gather": gather_binomial},
    "linear": {"reduce": reduce_linear, "bcast": bcast_linear, "gather": gather_linear},
}


def _shape(k):
    """(M nodes, L ranks per node, why the phases do not add up or None)."""
    lay = k.layout
    if lay is None:
        return 1, k.N, None
    sizes = sorted({len(m) for m in lay.members})
    if len(sizes) > 1:
        return lay.n_nodes, sizes[-1], f"nodes of unequal sizes {sizes}"
    return lay.n_nodes, sizes[0], None


def _head(k):
    """(the root's node, the root's place in its node)."""
    if k.layout is None:
        return 0, k.root
    node = k.layout.nodes[k.root]
    return node, k.layout.members[node].index(k.root)


class NodeSplit:
    """How a node-aware algorithm splits its call across nodes; declared on its register.

    - ``first``: the intra phase before the inter one, toward each node's head
      (``"reduce"``, ``"gather"``; None: none);
    - ``small``, ``large``: the flat algorithms the heads run by default,
      ``small`` up to :data:`SMALL` bytes per rank and ``large`` above, but
      ``small`` at any size when ``large`` is commutative-only and the op is
      not. Their primitive is the inter phase's (:attr:`inter`);
    - ``last``: the intra phase after it, from each node's head (``"bcast"``; None: none);
    - ``rooted``: the call has a root, which heads its node;
    - ``blocks``: the heads exchange node blocks (L·n elements each) and
      ``last`` hands every rank all N·n elements (allgather); otherwise every
      phase moves the call's n elements.

    The algorithm's declared cost (:meth:`cost_phases`), the demo's lines
    (:func:`phases`) and the bench's model by phases
    (:func:`mpicoll.bench.plan_prices.hierarchical_time`) are read off it.
    """

    __slots__ = ("first", "small", "large", "last", "rooted", "blocks")

    def __init__(self, *, small, large, first=None, last=None, rooted=False, blocks=False):
        self.small, self.large, self.first, self.last = small, large, first, last
        self.rooted, self.blocks = rooted, blocks

    @property
    def inter(self):
        """The primitive the heads run among themselves (allgather's: allgatherv)."""
        return self.small.primitive

    def default(self, nbytes, commutative):
        """The flat algorithm among heads when ``inter`` is not given (``nbytes`` per rank)."""
        if nbytes <= SMALL or (self.large.commutative_only and not commutative):
            return self.small
        return self.large

    def flat(self, inter, nbytes, commutative):
        """The algorithm among heads: the one named ``inter``, else :meth:`default`'s."""
        if inter is None:
            return self.default(nbytes, commutative)
        return lookup(self.inter, inter)

    def cost_phases(self, k):
        """The phases of call ``k``, ``([(cost, call), ...], why)``, for :class:`Phases`.

        Each phase's flat algorithm's declared cost and the call it runs on its
        group; ``why``: the reason the phases do not add up for ``k`` (None where they do).
        """
        M, L, why = _shape(k)
        intra = _INTRA_COST[k.options.get("intra", "binomial")]
        inter = self.flat(k.options.get("inter"), k.n * k.itemsize, k.commutative)
        node, at = _head(k) if self.rooted else (0, 0)
        c = dict(commutative=k.commutative, itemsize=k.itemsize)
        parts = []
        if self.first:
            parts.append((_cost(intra[self.first]), Call(L, k.n, root=at, **c)))
        if M > 1:
            if self.blocks:
                parts.append((_cost(inter), Call(M, L * k.n, counts=[L * k.n] * M, **c)))
            else:
                parts.append((_cost(inter), Call(M, k.n, root=node, **c)))
            if self.first == "reduce" and at and not k.commutative and why is None:
                why = "the root's node forwards to a head other than its first rank"
        if self.last:
            n = k.N * k.n if self.blocks else k.n
            parts.append((_cost(intra[self.last]), Call(L, n, root=at, **c)))
        return parts, why


def _cost(fn):
    return getattr(fn, "cost", None)


def split_of(primitive):
    """The :class:`NodeSplit` of ``primitive``'s ``hierarchical`` algorithm (None: it has none)."""
    return getattr(table(primitive).get("hierarchical"), "split", None)


def default_inter(primitive, nbytes, commutative):
    """The flat algorithm among node heads when ``inter`` is not given (``nbytes`` per rank)."""
    return split_of(primitive).default(nbytes, commutative)


def _configure(base):
    """``configure(name, options)`` of ``base``: a variant with ``inter``/``intra`` fixed."""
    primitive = base.primitive
    inter_of = base.split.inter

    def configure(name, options):
        unknown = set(options) - {"inter", "intra"}
        if unknown:
            raise ArgumentError(
                f"algorithm: {name!r}: unknown option(s) {', '.join(sorted(unknown))}; "
                f"valid: inter, intra")
        intra = options.get("intra", "binomial")
        if intra not in _INTRA:
            raise ArgumentError(
                f"algorithm: {name!r}: intra must be one of {', '.join(_INTRA)}; got {intra!r}")
        inter = options.get("inter")
        commutative_only = False
        if inter is not None:
            flat = _flat_inter(inter_of)
            if inter not in flat:
                raise ArgumentError(
                    f"algorithm: {name!r}: inter must be a flat {inter_of} algorithm, one of "
                    f"{', '.join(flat)}; got {inter!r}")
            commutative_only = lookup(inter_of, inter).commutative_only

        def variant(ctx, *args):
            return base(ctx, *args, inter=inter, intra=intra)

        variant.__doc__ = base.__doc__
        variant.__name__ = variant.__qualname__ = base.__name__
        variant.primitive = primitive
        variant.algorithm = name
        variant.commutative_only = commutative_only
        variant.check_layout = base.check_layout
        if intra == "shm":
            variant.host_only = True
            variant.check_layout = _check_layout_shm
        variant.cost = base.cost
        return variant
    return configure


def _flat_inter(primitive):
    """The algorithms an inter phase may take: flat point-to-point ones.

    Not native, not node-aware, not the shm ones (they read memory the leaders of other
    nodes lack).
    """
    return [a for a in algorithms(primitive) if a not in ("native", "hierarchical")
            and getattr(lookup(primitive, a), "check_layout", None) is None]


def _check_layout_shm(lay, commutative):
    """As :func:`_check_layout`, and every node in one shared-memory domain (intra=shm)."""
    split = lay.memory_split()
    if split:
        return f"algorithm: hierarchical:intra=shm reads peers' memory inside a node; {split}"
    return _check_layout(lay, commutative)


def _check_layout(lay, commutative):
    """Why this call cannot run on ``lay`` (None if it can)."""
    if not commutative and not lay.contiguous:
        return (f"algorithm: hierarchical needs nodes that are blocks of consecutive ranks "
                f"to keep rank order for a non-commutative op; the nodes are "
                f"{lay.describe()}. Use a flat algorithm, or a commutative op")
    return None


def _variants(base):
    """``variants()`` of ``base``: the names of its configured variants.

    Every intra option and every flat inter algorithm registered now, for tools that
    sweep them.
    """
    inter_of = base.split.inter

    def variants():
        name = base.algorithm
        flat = _flat_inter(inter_of)
        return ([f"{name}:intra={i}" for i in _INTRA if i != "binomial"]
                + [f"{name}:inter={a}" for a in flat])
    return variants


def _register(primitive, split, text):
    """Register the decorated function as ``primitive``'s ``hierarchical`` algorithm.

    ``split``: its :class:`NodeSplit`, whose phases are its declared cost (``text``
    names them, as its docstring's ``Cost:`` does); it takes the options
    ``inter``/``intra`` (``configure``, ``variants``) and checks the layout it runs on.
    """
    def decorate(fn):
        fn = register(primitive, "hierarchical", cost=Phases(text, split.cost_phases))(fn)
        fn.split = split
        fn.check_layout = _check_layout
        fn.configure = _configure(fn)
        fn.variants = _variants(fn)
        return fn
    return decorate


_ALLREDUCE = NodeSplit(first="reduce", small=allreduce_recursive_doubling,
                       large=allreduce_rabenseifner, last="bcast")


@_register("allreduce", _ALLREDUCE,
           "intra reduce (L ranks) + inter allreduce (M leaders) + intra bcast (L ranks)")
def allreduce_hierarchical(ctx, sendbuf, recvbuf, op, inter=None, intra="binomial"):
    """Node-aware: reduce inside each node, allreduce among node leaders, broadcast inside.

    Cost: intra reduce (L ranks) + inter allreduce (M leaders) + intra bcast
    (L ranks), each phase its algorithm's own cost: 2⌈log2 L⌉(α + nβ) +
    ⌈log2 L⌉nγ inside nodes (binomial) plus the inter algorithm on M leaders
    (default recursive doubling below 64 KiB: ⌈log2 M⌉(α' + nβ' + nγ);
    Rabenseifner above); exact on nodes of equal size. Only leaders cross nodes.
    Any op on block placements (rank order kept); see the module docstring.
    """
    lay = ctx.layout
    local = _local(ctx, lay)
    parts = _INTRA[intra]
    data = sendbuf
    if sendbuf is None:                 # in place: reduce reads a copy of recvbuf
        data = ctx.scratch(recvbuf.size)
        ctx.copy(data, recvbuf)
    parts["reduce"](local, data, recvbuf if local.rank == 0 else None, op, 0)
    if local.rank == 0 and lay.n_nodes > 1:
        fn = _ALLREDUCE.flat(inter, recvbuf.nbytes, op.is_commutative)
        fn(Group(ctx, lay.leaders), None, recvbuf, op)
    parts["bcast"](local, recvbuf, 0)


_REDUCE = NodeSplit(first="reduce", small=reduce_binomial, large=reduce_rabenseifner,
                    rooted=True)


@_register("reduce", _REDUCE, "intra reduce (L ranks) + inter reduce (M heads)")
def reduce_hierarchical(ctx, sendbuf, recvbuf, op, root, inter=None, intra="binomial"):
    """Node-aware: reduce inside each node to its head, then among heads to the root.

    Heads: the root on its node, the lowest rank elsewhere. Cost: intra reduce
    (L ranks) + inter reduce (M heads), each phase its algorithm's own cost:
    ⌈log2 L⌉(α + nβ + nγ) inside nodes (binomial) plus the inter algorithm on
    M heads (default binomial below 64 KiB: ⌈log2 M⌉(α' + nβ' + nγ);
    Rabenseifner above for commutative ops); exact on nodes of equal size.
    Any op on block placements.
    """
    lay = ctx.layout
    heads = _heads(lay, root)
    local = _local(ctx, lay)
    head = local.members.index(heads[lay.nodes[ctx.rank]])
    part = None
    if ctx.rank == root and lay.n_nodes == 1:
        part = recvbuf
    elif local.rank == head:
        part = ctx.scratch(sendbuf.size)        # the node's partial result
    _INTRA[intra]["reduce"](local, sendbuf, part, op, head)
    if local.rank == head and lay.n_nodes > 1:
        fn = _REDUCE.flat(inter, sendbuf.nbytes, op.is_commutative)
        fn(Group(ctx, heads), part, recvbuf if ctx.rank == root else None, op, lay.nodes[root])


_BCAST = NodeSplit(small=bcast_binomial, large=bcast_scatter_allgather, last="bcast",
                   rooted=True)


@_register("bcast", _BCAST, "inter bcast (M heads) + intra bcast (L ranks)")
def bcast_hierarchical(ctx, buf, root, inter=None, intra="binomial"):
    """Node-aware: broadcast among node heads (the root and each node's lowest rank), then inside.

    Cost: inter bcast (M heads) + intra bcast (L ranks), each phase its
    algorithm's own cost: the inter algorithm on M heads (default binomial
    below 64 KiB: ⌈log2 M⌉(α' + nβ'); scatter + allgather above) plus
    ⌈log2 L⌉(α + nβ) inside nodes (binomial); exact on nodes of equal size.
    No reduction, so no limits on ops or placements.
    """
    lay = ctx.layout
    heads = _heads(lay, root)
    local = _local(ctx, lay)
    head = local.members.index(heads[lay.nodes[ctx.rank]])
    if local.rank == head and lay.n_nodes > 1:
        _BCAST.flat(inter, buf.nbytes, True)(Group(ctx, heads), buf, lay.nodes[root])
    _INTRA[intra]["bcast"](local, buf, head)


_ALLGATHER = NodeSplit(first="gather", small=allgatherv_bruck, large=allgatherv_ring,
                       last="bcast", blocks=True)


@_register("allgather", _ALLGATHER,
           "intra gather (L ranks) + inter allgatherv (M leaders) + intra bcast (L ranks)")
def allgather_hierarchical(ctx, sendbuf, recvbuf, inter=None, intra="binomial"):
    """Node-aware: gather in each node, allgatherv of node blocks among leaders, bcast inside.

    Cost: intra gather (L ranks) + inter allgatherv (M leaders) + intra bcast
    (L ranks), each phase its algorithm's own cost: ⌈log2 L⌉α + (L-1)nβ
    (gather) and ⌈log2 L⌉(α + Nnβ) (broadcast of the whole result) inside
    nodes (binomial), plus the inter allgatherv of M node blocks (default
    Bruck below 64 KiB per rank, ring above); exact on nodes of equal size.
    Any placement:
    nodes that are not blocks of consecutive ranks cost the leader one local
    permutation of the result.
    """
    lay = ctx.layout
    c = sendbuf.size
    local = _local(ctx, lay)
    order = [r for m in lay.members for r in m]         # ranks in node-major order
    start = [0]
    for m in lay.members:
        start.append(start[-1] + len(m) * c)
    me = lay.nodes[ctx.rank]
    leader = local.rank == 0
    if leader:
        node_major = recvbuf if lay.contiguous else ctx.scratch(recvbuf.size)
        mine = node_major[start[me]:start[me + 1]]
    else:
        mine = None
    _INTRA[intra]["gather"](local, sendbuf, mine, 0)
    if leader and lay.n_nodes > 1:
        fn = _ALLGATHER.flat(inter, sendbuf.nbytes, True)
        counts = [start[i + 1] - start[i] for i in range(lay.n_nodes)]
        fn(Group(ctx, lay.leaders), None, node_major, counts, start[:-1])
    if leader and node_major is not recvbuf:
        i = 0                       # put runs of consecutive ranks back in rank order
        while i < len(order):
            j = i + 1
            while j < len(order) and order[j] == order[j - 1] + 1:
                j += 1
            ctx.copy(recvbuf[order[i] * c:(order[j - 1] + 1) * c], node_major[i * c:j * c])
            i = j
    _INTRA[intra]["bcast"](local, recvbuf, 0)


def phases(primitive, lay, nbytes, commutative=True, root=0, inter=None, intra="binomial"):
    """The phases of ``primitive``'s hierarchical algorithm on ``lay``, as lines of text.

    Read by the demo; it names what the functions above run, with the same
    default choice of inter algorithm (``nbytes``: bytes per rank).
    """
    split = split_of(primitive)
    heads = _heads(lay, root if split.rooted else None)
    name = split.flat(inter, nbytes, commutative).algorithm
    hs = " ".join(map(str, heads))
    lines = []
    if split.first:
        lines.append(f"1. inside each node: {intra} {split.first} to the node's head (ranks {hs})")
    lines.append(f"{len(lines) + 1}. between nodes: {name} {split.inter} among the heads {hs}"
                 + ("" if lay.n_nodes > 1 else " (one node: nothing crosses)"))
    if split.last:
        lines.append(f"{len(lines) + 1}. inside each node: {intra} {split.last} from the head")
    return lines


