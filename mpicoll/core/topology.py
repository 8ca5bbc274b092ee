"""Which node each rank runs on: detected once per private communicator.

Node-aware (hierarchical) algorithms, the two-level cost model and the
intra/inter-node traffic counters all read one :class:`Layout`, made when
the private communicator is created (:func:`mpicoll.engine.context.private_comm`)
and kept as an attribute of it:

- by default from ``Split_type(MPI.COMM_TYPE_SHARED)`` (ranks that can share
  memory are one node) and an ``Allgather`` of each rank's node leader;
- or, to study node-aware algorithms on one machine, from ``MPICOLL_NODES``:
  ``K`` (blocks of K consecutive ranks, the last one shorter if N % K),
  ``a,b,c`` (consecutive blocks of those sizes, summing to N) or
  ``cyclic:K`` (rank r on node r % K: round-robin placement). The ranks are
  ``MPI.COMM_WORLD``'s: like a real node, a simulated one holds processes, so
  a sub-communicator (``Split``, reordered ranks) sees its processes on the
  nodes they are on in the world. (A communicator with processes outside the
  world, e.g. spawned ones, applies the value to its own ranks.)

Every rank must see the same layout -- the node-aware plans are built from
it -- so the ``MPICOLL_NODES`` values of the ranks are compared first (one
``allgather`` when the private communicator is made): a value that differs
between ranks, or is wrong on some, raises :class:`ArgumentError` on every
rank instead of a hang. Nodes are numbered by their lowest rank.
"""
import os

from mpi4py import MPI

from .commcache import CommCache
from .errors import ArgumentError

__all__ = ["Layout", "detect", "layout", "parse_nodes"]

#: The node layout of each private communicator (freed with it).
_LAYOUTS = CommCache()


class Layout:
    """The node of every rank of one communicator (immutable, equal on every rank)."""

    __slots__ = ("nodes", "members", "leaders", "contiguous", "source", "memory")

    def __init__(self, nodes, source="shared-memory", memory=None):
        # Renumber nodes by first appearance (= by their lowest rank).
        first = {}
        for n in nodes:
            first.setdefault(n, len(first))
        self.nodes = tuple(first[n] for n in nodes)
        members = [[] for _ in first]
        for r, n in enumerate(self.nodes):
            members[n].append(r)
        self.members = tuple(tuple(m) for m in members)
        self.leaders = tuple(m[0] for m in self.members)
        #: nodes are blocks of consecutive ranks in node order (block placement)
        self.contiguous = list(self.nodes) == sorted(self.nodes)
        #: where the layout came from: "shared-memory" or "MPICOLL_NODES=..."
        self.source = source
        #: the real shared-memory domain of every rank (a simulated layout's nodes may
        #: span several: MPICOLL_NODES on ranks of several hosts)
        self.memory = self.nodes if memory is None else tuple(memory)

    def shares_memory(self, ranks):
        """True when ``ranks`` all lie in one real shared-memory domain."""
        return len({self.memory[r] for r in ranks}) <= 1

    def memory_split(self):
        """None when every node of this layout lies in one shared-memory domain.

        Else a sentence naming the first node that does not (for refusals).
        """
        for n, m in enumerate(self.members):
            if not self.shares_memory(m):
                return (f"node {n} (ranks {' '.join(map(str, m))}) of {self.describe()} "
                        f"spans {len({self.memory[r] for r in m})} shared-memory domains")
        return None

    @property
    def n_nodes(self):
        """The number of nodes."""
        return len(self.members)

    @property
    def size(self):
        """The number of ranks."""
        return len(self.nodes)

    def same_node(self, a, b):
        """True when ranks ``a`` and ``b`` are on the same node."""
        return self.nodes[a] == self.nodes[b]

    def describe(self):
        """``2 nodes: [0 1 2] [3 4]`` — for the demo and bench headers."""
        groups = " ".join("[" + " ".join(map(str, m)) + "]" for m in self.members)
        return f"{self.n_nodes} node{'s' if self.n_nodes != 1 else ''}: {groups} ({self.source})"

    def __eq__(self, other):
        return isinstance(other, Layout) and self.nodes == other.nodes

    def __hash__(self):
        return hash(self.nodes)

    def __repr__(self):
        return f"Layout({self.describe()})"


def parse_nodes(text, size):
    """The node of each of ``size`` ranks described by an ``MPICOLL_NODES`` value."""
    spec = text.strip()
    where = f"MPICOLL_NODES={text!r}"
    try:
        if spec.startswith("cyclic:"):
            k = int(spec[len("cyclic:"):])
            if k < 1:
                raise ValueError
            return [r % k for r in range(size)]
        parts = [int(p) for p in spec.split(",")]
    except ValueError:
        raise ArgumentError(
            f"{where}: expected K (ranks per node), a,b,... (node sizes) or cyclic:K "
            f"with positive integers") from None
    if any(p < 1 for p in parts):
        raise ArgumentError(f"{where}: node sizes must be positive; got {parts}")
    if len(parts) == 1:
        k = parts[0]
        return [r // k for r in range(size)]
    if sum(parts) != size:
        raise ArgumentError(
            f"{where}: node sizes add up to {sum(parts)}, but the communicator has {size} ranks")
    return [n for n, p in enumerate(parts) for _ in range(p)]


def _simulated(spec, pcomm):
    """The nodes of ``pcomm``'s ranks under ``MPICOLL_NODES=spec``.

    Its processes' nodes in ``MPI.COMM_WORLD`` (its own ranks where some process is not in
    the world).
    """
    size = pcomm.Get_size()
    mine, world = pcomm.Get_group(), MPI.COMM_WORLD.Get_group()
    try:
        ranks = MPI.Group.Translate_ranks(mine, list(range(size)), world)
    finally:
        mine.Free()
        world.Free()
    if MPI.UNDEFINED in ranks:
        return parse_nodes(spec, size)
    nodes = parse_nodes(spec, MPI.COMM_WORLD.Get_size())
    return [nodes[r] for r in ranks]


def _agreed_spec(pcomm):
    """This rank's ``MPICOLL_NODES`` value, once every rank has the same.

    Else ArgumentError on every rank, naming the values and their ranks.
    """
    spec = os.environ.get("MPICOLL_NODES", "").strip()
    if pcomm.Get_size() == 1:
        return spec
    every = pcomm.allgather(spec)
    if len(set(every)) > 1:
        groups = {}
        for r, s in enumerate(every):
            groups.setdefault(s, []).append(str(r))
        shown = "; ".join(f"{repr(s) if s else 'unset'} on rank(s) {', '.join(rs)}"
                          for s, rs in groups.items())
        raise ArgumentError(f"MPICOLL_NODES: every rank must give the same value (the ranks "
                            f"would build different plans); got {shown}")
    return spec


def _memory_domains(pcomm):
    """Every rank's shared-memory domain: its lowest rank of ``pcomm`` sharing memory with it.

    Collective over ``pcomm``.
    """
    local = pcomm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        leader = local.allreduce(pcomm.Get_rank(), op=MPI.MIN)
    finally:
        local.Free()
    return pcomm.allgather(leader)


def detect(pcomm):
    """Find the layout of ``pcomm`` (collective over it) and attach it; return it."""
    size = pcomm.Get_size()
    spec = _agreed_spec(pcomm)
    memory = _memory_domains(pcomm) if size > 1 else [0]
    if spec:
        lay = Layout(_simulated(spec, pcomm), f"MPICOLL_NODES={spec}", memory)
    else:
        lay = Layout(memory)
    _LAYOUTS.set(pcomm, lay)
    return lay


def layout(pcomm):
    """The layout attached to private communicator ``pcomm`` (one rank, no MPI traffic)."""
    lay = _LAYOUTS.get(pcomm)
    if lay is None:
        raise RuntimeError("mpicoll: no node layout on this communicator (not a private one?)")
    return lay
