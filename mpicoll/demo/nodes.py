"""The demo's node-aware section: layout, hierarchical allreduce's phases, traffic across nodes."""
import numpy as np
from mpi4py import MPI

from .. import api as C
from ..coll.hierarchical import phases
from ..core.topology import layout
from ..engine.context import private_comm, traffic
from ..sched.inspect import plan_of
from .output import agree, fmt, same

__all__ = ["show_nodes"]

FLAT = "recursive_doubling"     # the flat algorithm the node-aware one is compared with


def _across(plan, lay):
    """Messages and elements this rank's plan sends to other nodes."""
    msgs = [n for kind, peer, n in plan.messages()
            if kind == "send" and not lay.same_node(plan.rank, peer)]
    return len(msgs), sum(msgs)


def show_nodes(out, comm, k, dtype, dev):
    """Hierarchical allreduce beside a flat one: who crosses nodes, checked against native."""
    rank, n = comm.Get_rank(), comm.Get_size()
    lay = layout(private_comm(comm))
    out.heading("node-aware allreduce: reduce inside nodes, allreduce among node heads, broadcast "
                "inside (mpicoll.allreduce, algorithm hierarchical)")
    out.say(f"nodes: {lay.describe()}")
    if lay.n_nodes == 1:
        out.say("one node here, so nothing crosses nodes. Simulate nodes with\n"
                "  MPICOLL_NODES=2 mpirun -n 4 python -m mpicoll.demo --only nodes\n"
                "or run on real ones (scripts/netns_cluster.sh makes several on one machine)")
    mine = np.array([rank + 1] * k, dtype=dtype)
    nbytes = mine.nbytes
    for line in phases("allreduce", lay, nbytes):
        out.say("  " + line)
    ref = np.zeros_like(mine)
    comm.Allreduce(mine, ref, MPI.SUM)
    with traffic() as t:
        got = C.allreduce(dev(mine.copy()), algorithm="hierarchical")
        flat = C.allreduce(dev(mine.copy()), algorithm=FLAT)
    problems = [f"{name} gave {fmt(r)}, native {fmt(ref)}"
                for name, r in (("hierarchical", got), (FLAT, flat)) if not same(r, ref)]
    h, f = (t.calls + [None, None])[:2] if t.calls else (None, None)
    # The counters must equal what the plans (recorded on this layout) send across nodes.
    for name, rec in (("hierarchical", h), (FLAT, f)):
        if rec is None:
            continue
        plan = plan_of("allreduce", name, n, rank, k, mine.itemsize, layout=lay)
        msgs, elems = _across(plan, lay)
        if (rec.inter_sent_msgs, rec.inter_sent_bytes) != (msgs, elems * mine.itemsize):
            problems.append(f"{name}: counted {rec.inter_sent_msgs} messages / "
                            f"{rec.inter_sent_bytes} B across nodes, its plan sends {msgs} / "
                            f"{elems * mine.itemsize} B")
    agree(comm, problems)
    role = "head" if rank in lay.leaders else "member"

    def row(rec):
        if rec is None:
            return "nothing sent"
        return (f"inside the node {rec.intra_sent_msgs} msgs {rec.intra_sent_bytes} B, "
                f"across nodes {rec.inter_sent_msgs} msgs {rec.inter_sent_bytes} B")
    out.ranked(f"rank {rank} (node {lay.nodes[rank]}, {role}):\n"
               f"  hierarchical: {row(h)}\n  flat {FLAT}: {row(f)}")
    mine_crossed = np.array([h.inter_sent_msgs if h else 0, f.inter_sent_msgs if f else 0])
    crossed = comm.reduce(mine_crossed, op=MPI.SUM, root=0)
    if rank == 0 and lay.n_nodes > 1:
        print(f"messages across nodes, all ranks: hierarchical {crossed[0]}, flat {FLAT} "
              f"{crossed[1]}", flush=True)
    out.say(f"check: both equal the native MPI allreduce on every rank, and the counters match "
            f"the plans' messages across nodes {out.mark()}")

