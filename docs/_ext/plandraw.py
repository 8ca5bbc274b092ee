"""Space-time diagrams of mpicoll plans: ranks down, steps across, an arrow per message.

Every rank's plan (:func:`mpicoll.sched.inspect.plan_of`) is cut into
*rounds* at its blocking points: a SEND, RECV or SENDRECV, or a WAIT, ends
a round of that rank. Messages are matched across ranks as MPI matches
them: per (source, destination) pair, the k-th send posted by the source
meets the k-th receive posted by the destination (one tag, one communicator,
MPI's non-overtaking rule).

The steps on the horizontal axis come from a simple model, the same for
every algorithm: a round posts its sends and receives when it starts, a
message takes one step, and a round ends one step after it started or when
the last message it receives has arrived, whichever is later (sends are
eager: a sender does not wait for its receiver). A rank's COPY and REDUCE
operations are drawn where they run, at the start of the round that follows
the blocking point before them.

Used by the documentation's algorithm gallery (``docs/_ext/gallery.py``) and,
from the command line, to draw the README's picture::

    python docs/_ext/plandraw.py allreduce ring 4 -o docs/_static/ring_allreduce_n4.png
"""
import os
import sys

__all__ = ["Message", "Timeline", "timeline", "draw", "main"]


class Message:
    """One message: ``source`` posts it at step ``depart``; ``dest`` has it at step ``arrive``."""

    __slots__ = ("source", "dest", "elements", "depart", "arrive")

    def __init__(self, source, dest, elements, depart, arrive):
        self.source, self.dest, self.elements = source, dest, elements
        self.depart, self.arrive = depart, arrive

    def __repr__(self):
        return (f"Message({self.source}->{self.dest}, {self.elements} el, "
                f"steps {self.depart}->{self.arrive})")


class Timeline:
    """The diagram's content: messages, local steps and the length of a set of plans.

    ``messages``: :class:`Message` list; ``reduces`` and ``copies``: ``(rank, step)``
    pairs, one per operation; ``steps``: the last step of any rank; ``rounds``: the
    rounds of each rank (its blocking points).
    """

    __slots__ = ("size", "messages", "reduces", "copies", "steps", "rounds")

    def __init__(self, size, messages, reduces, copies, steps, rounds):
        self.size, self.messages = size, messages
        self.reduces, self.copies = reduces, copies
        self.steps, self.rounds = steps, rounds

    def summary(self):
        """``"24 messages, 72 elements sent, 12 reductions, 6 steps"`` for captions."""
        n = len(self.messages)
        elements = sum(m.elements for m in self.messages)
        return (f"{n} message{'s' if n != 1 else ''}, {elements:,} elements sent, "
                f"{len(self.reduces)} reductions, {self.steps} steps")


def _rounds_of(plan):
    """Cut one rank's plan into rounds.

    Returns ``(sends, recvs, local, nrounds)``: ``sends`` = ``[(dest, elements, round
    posted)]`` and ``recvs`` = ``[(source, elements, round posted, round completed)]``
    in posting order; ``local`` = ``[("reduce" | "copy", round it runs in)]``.
    """
    from mpicoll.sched.plan import COPY, IRECV, ISEND, RECV, REDUCE, SEND, SENDRECV, WAIT
    sends, recvs, local = [], [], []
    pending = {}            # slot -> index in recvs of an IRECV not yet waited for
    k = 0
    for op in plan.ops:
        kind = op[0]
        if kind == SEND:
            sends.append((op[2], op[1].size, k))
            k += 1
        elif kind == RECV:
            recvs.append([op[2], op[1].size, k, k])
            k += 1
        elif kind == SENDRECV:
            sends.append((op[2], op[1].size, k))
            recvs.append([op[4], op[3].size, k, k])
            k += 1
        elif kind == ISEND:
            sends.append((op[2], op[1].size, k))
        elif kind == IRECV:
            pending[op[3]] = len(recvs)
            recvs.append([op[2], op[1].size, k, None])
        elif kind == WAIT:
            for slot in op[1]:
                i = pending.pop(slot, None)
                if i is not None:
                    recvs[i][3] = k
            k += 1
        elif kind == REDUCE:
            local.append(("reduce", k))
        elif kind == COPY:
            local.append(("copy", k))
    if pending:
        raise ValueError(f"rank {plan.rank}: receives never waited for (slots {sorted(pending)})")
    return sends, [tuple(r) for r in recvs], local, k


def timeline(plans):
    """The :class:`Timeline` of ``plans`` (every rank's plan of one call, indexed by rank).

    Raises ValueError when the plans do not match (a send without its receive,
    element counts that differ) or cannot finish under the model (a cycle of
    receives: the plans would deadlock in MPI too).
    """
    size = len(plans)
    cut = [_rounds_of(p) for p in plans]
    # Match per (source, dest) in posting order.
    outgoing = {}
    for s, (sends, _, _, _) in enumerate(cut):
        for dest, n, posted in sends:
            outgoing.setdefault((s, dest), []).append((n, posted))
    # waits[r][k]: messages (source, posted round there, elements) that round k of r receives
    waits = [[[] for _ in range(c[3])] for c in cut]
    pairs, matched = [], {}
    for d, (_, recvs, _, _) in enumerate(cut):
        taken = {}
        for source, n, _, done in recvs:
            i = taken.get(source, 0)
            taken[source] = i + 1
            queue = outgoing.get((source, d), [])
            if i >= len(queue):
                raise ValueError(f"rank {d} receives {i + 1} message(s) from rank {source}, "
                                 f"which sends {len(queue)}")
            sn, posted = queue[i]
            if sn != n:
                raise ValueError(f"message {i} from rank {source} to rank {d}: {sn} elements "
                                 f"sent, {n} expected")
            waits[d][done].append((source, posted))
            pairs.append((source, d, n, posted, done))
        for source, i in taken.items():
            matched[(source, d)] = i
    for (s, d), queue in outgoing.items():
        got = matched.get((s, d), 0)
        if got != len(queue):
            raise ValueError(f"rank {s} sends {len(queue)} message(s) to rank {d}, which "
                             f"receives {got}")
    # end[r][k]: the step at which round k of rank r ends; a round starts where the last ended.
    end = [[] for _ in range(size)]

    def start(r, k):
        return 0 if k == 0 else end[r][k - 1]

    left = sum(c[3] for c in cut)
    while left:
        moved = False
        for r in range(size):
            k = len(end[r])
            if k == cut[r][3]:
                continue
            departs = []
            for source, posted in waits[r][k]:
                if posted > len(end[source]):      # the sender has not reached that round
                    break
                departs.append(start(source, posted))
            else:
                end[r].append(max([start(r, k) + 1] + [t + 1 for t in departs]))
                left -= 1
                moved = True
        if not moved:
            stuck = [r for r in range(size) if len(end[r]) < cut[r][3]]
            raise ValueError(f"the plans cannot complete: ranks {stuck} wait for each other")
    messages = [Message(s, d, n, start(s, posted), end[d][done])
                for s, d, n, posted, done in pairs]
    messages.sort(key=lambda m: (m.depart, m.source, m.dest))
    reduces, copies = [], []
    for r, (_, _, local, _) in enumerate(cut):
        for what, k in local:
            (reduces if what == "reduce" else copies).append((r, start(r, k)))
    steps = max((e[-1] for e in end if e), default=0)
    return Timeline(size, messages, reduces, copies, steps, [c[3] for c in cut])


def draw(tl, path, *, title=None, layout=None, full=None, dpi=96):
    """Draw ``tl`` (a :class:`Timeline`) as a PNG at ``path``.

    ``layout``: a :class:`mpicoll.core.topology.Layout` to shade nodes and colour the
    messages that cross them; ``full``: the element count drawn at full line width
    (default: the largest message).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    size, steps = tl.size, max(tl.steps, 1)
    full = full or max((m.elements for m in tl.messages), default=0) or 1
    width = 1.6 + 0.62 * steps
    height = 0.75 + 0.42 * size
    fig, ax = plt.subplots(figsize=(width, height), dpi=dpi)
    nodes = layout is not None and layout.n_nodes > 1
    if nodes:
        for i, members in enumerate(layout.members):
            for r in members:
                ax.axhspan(r - 0.5, r + 0.5, color=("#eef3fb", "#fbf1e6")[i % 2], zorder=0, lw=0)
    for r in range(size):
        ax.plot([0, steps], [r, r], color="#b0b0b0", lw=0.8, zorder=1)
    inside, across = "#2a62b8", "#c0392b"
    for m in tl.messages:
        lw = 0.6 + 2.2 * min(1.0, m.elements / full)
        crosses = nodes and not layout.same_node(m.source, m.dest)
        color = across if crosses else inside
        style = "-" if m.elements else (0, (2, 2))
        ax.annotate("", xy=(m.arrive, m.dest), xytext=(m.depart, m.source),
                    arrowprops=dict(arrowstyle="-|>", color=color, lw=lw, linestyle=style,
                                    shrinkA=0, shrinkB=3, mutation_scale=8),
                    zorder=3)
    if tl.copies:
        ys, xs = zip(*sorted(set(tl.copies)), strict=True)
        ax.scatter([x + 0.14 for x in xs], ys, marker="s", s=14, facecolor="white",
                   edgecolor="#999999", lw=0.8, zorder=4)
    if tl.reduces:
        ys, xs = zip(*sorted(set(tl.reduces)), strict=True)
        ax.scatter([x + 0.14 for x in xs], ys, marker="o", s=30, color="#e67e22",
                   edgecolor="#8a4a10", lw=0.6, zorder=5)
    ax.set_xlim(-0.3, steps + 0.45)
    ax.set_ylim(size - 0.5, -0.5)
    ax.set_yticks(range(size))
    labels = [f"rank {r}" for r in range(size)]
    if nodes:
        labels = [f"rank {r} (node {layout.nodes[r]})" for r in range(size)]
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xticks(range(steps + 1))
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("step", fontsize=8)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    if title:
        ax.set_title(title, fontsize=9, loc="left")
    legend = [Line2D([], [], color=inside, lw=1.5,
                     label="message" + (" in a node" if nodes else ""))]
    if nodes:
        legend.append(Line2D([], [], color=across, lw=1.5, label="across nodes"))
    if tl.reduces:
        legend.append(Line2D([], [], ls="", marker="o", color="#e67e22", markersize=5,
                             label="reduce"))
    if tl.copies:
        legend.append(Line2D([], [], ls="", marker="s", markerfacecolor="white",
                             markeredgecolor="#999999", markersize=4, label="copy"))
    ax.legend(handles=legend, fontsize=7, frameon=False, loc="upper left",
              bbox_to_anchor=(1.0, 1.02), handlelength=1.4, borderaxespad=0.2)
    fig.tight_layout(pad=0.3)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def main(argv=None):
    """``plandraw.py PRIMITIVE ALGORITHM N [-c COUNT] [--nodes K] [--import M] -o FILE.png``."""
    import argparse
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.dirname(os.path.dirname(here)))
    from mpicoll.core.topology import Layout, parse_nodes
    from mpicoll.sched.inspect import plans_of

    ap = argparse.ArgumentParser(description="Draw the space-time diagram of an mpicoll plan.")
    ap.add_argument("primitive")
    ap.add_argument("algorithm")
    ap.add_argument("size", type=int, help="number of ranks")
    ap.add_argument("-c", "--count", type=int, default=12, help="elements (default 12)")
    ap.add_argument("--nodes", help="node layout, as MPICOLL_NODES (e.g. 2 or 3,2)")
    ap.add_argument("--dpi", type=int, default=96)
    ap.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                    help="import a module or .py file first (a plug-in algorithm); repeatable")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    if a.imports:
        from mpicoll.core.plugins import import_modules
        import_modules(a.imports)
    lay = Layout(parse_nodes(a.nodes, a.size), f"MPICOLL_NODES={a.nodes}") if a.nodes else None
    plans = plans_of(a.primitive, a.algorithm, a.size, a.count, layout=lay)
    tl = timeline(plans)
    draw(tl, a.output, layout=lay, dpi=a.dpi,
         title=f"{a.primitive} {a.algorithm}, N = {a.size}, {a.count} elements")
    print(f"{a.output}: {tl.summary()}")


if __name__ == "__main__":
    main()
