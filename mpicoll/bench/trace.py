"""``--trace FILE.json``: a Chrome-trace timeline of one call of each hand-written algorithm.

Open the file in chrome://tracing or https://ui.perfetto.dev: one process per
traced call (primitive, algorithm, size), one track per rank, a slice per
send, receive, sendrecv, isend/irecv post, wait and local reduction, arrows
from each send to its matching receive (to the wait that completes an irecv;
a request's own ``Wait()`` is not traced, only waits through ``ctx.waitall``).
The call is made after two untimed warm-up calls; tracing goes through
``mpicoll.engine.context.trace_hook`` and ``mpicoll.device.reduce.trace_hook``,
which cost nothing when unset.

Timestamps: ranks on one host share the monotonic clock, so their slices are
aligned exactly; across hosts each rank's clock starts at the barrier before
the call (alignment to within the barrier's exit skew).
"""
import json
import time

from mpicoll.device import reduce as _reduce
from mpicoll.engine import context as _context

from .specs import SPECS, Case

__all__ = ["Tracer", "record_call"]


def record_call(fn, comm):
    """Run ``fn`` once with the hooks set; return (t_start, t_end, events) on this rank."""
    events = []

    def hook(kind, t0, t1, info):
        events.append((kind, t0, t1, info))

    comm.Barrier()
    _context.trace_hook = _reduce.trace_hook = hook
    try:
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
    finally:
        _context.trace_hook = _reduce.trace_hook = None
    return t0, t1, events


def _name(kind, info):
    if kind == "reduce":
        return f"reduce {info.get('op', '')}".strip()
    if kind == "wait":
        return f"wait ({info.get('requests', 1)})"
    parts = [kind]
    if "dest" in info:
        parts.append(f"→{info['dest']}")
    if "source" in info:
        parts.append(f"←{info['source']}")
    return " ".join(parts)


class Tracer:
    """Collects traced calls during a sweep; rank 0 writes them as one Chrome trace."""

    def __init__(self, path, nbytes=None):
        self.path, self.nbytes = path, nbytes
        self.calls = []          # rank 0: (title, [(t0, t1, events) per rank])
        self.single_host = None

    def trace_primitive(self, sweep, primitive, labels):
        """Trace one call of each hand-written algorithm of ``primitive`` in the sweep."""
        comm, o = sweep.comm, sweep.opts
        if self.single_host is None:
            from mpi4py import MPI
            self.single_host = len(set(comm.allgather(MPI.Get_processor_name()))) == 1
        hand = [(lab, alg) for lab, alg, forced in labels
                if forced is None and alg not in ("native", "auto", "nccl", "raw")]
        if not hand:
            return
        nbytes = self.nbytes if self.nbytes is not None else max(sweep.sizes(primitive))
        case = Case(SPECS[primitive], nbytes, dtype=o.dtype, op=o.op, opname=o.opname,
                    root=o.root, comm=comm, am=sweep.am)
        case.prepare_check()
        for label, alg in hand:
            fn = case.call(alg)
            fn()
            fn()
            got = comm.gather(record_call(fn, comm), root=0)
            if comm.Get_rank() == 0:
                title = (f"{primitive} {label}: {case.bytes} B, N={comm.Get_size()}, "
                         f"{case.dtype.name}")
                self.calls.append((title, got))

    def chrome(self, meta=None):
        """The trace as a Chrome trace-event dict (rank 0)."""
        ev, flow_id = [], 0
        for pid, (title, ranks) in enumerate(self.calls):
            ev.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": title}})
            ev.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                       "args": {"sort_index": pid}})
            base = [min(r[0] for r in ranks)] * len(ranks) if self.single_host else \
                [r[0] for r in ranks]
            sends, recvs = {}, {}
            for rank, (t0, t1, events) in enumerate(ranks):
                us = lambda t, b=base[rank]: round((t - b) * 1e6, 3)   # noqa: E731
                ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": rank,
                           "args": {"name": f"rank {rank}"}})
                ev.append({"ph": "X", "name": title.split(":")[0], "cat": "call", "pid": pid,
                           "tid": rank, "ts": us(t0), "dur": us(t1) - us(t0)})
                mine = []
                for kind, a, b, info in events:
                    e = {"ph": "X", "name": _name(kind, info), "pid": pid, "tid": rank,
                         "cat": "compute" if kind == "reduce" else "p2p",
                         "ts": us(a), "dur": max(us(b) - us(a), 0.001), "args": dict(info)}
                    mine.append((kind, e))
                ev.extend(e for _, e in mine)
                for i, (kind, e) in enumerate(mine):
                    info = e["args"]
                    if "dest" in info:
                        sends.setdefault((rank, info["dest"]), []).append(e)
                    if "source" in info:
                        end = e
                        if kind == "irecv":     # the data lands during the next wait
                            end = next((w for k, w in mine[i + 1:] if k == "wait"), e)
                        recvs.setdefault((info["source"], rank), []).append(end)
            for key, slist in sends.items():     # k-th send a->b matches k-th receive
                for s, r in zip(slist, recvs.get(key, []), strict=False):
                    flow_id += 1
                    ev.append({"ph": "s", "id": flow_id, "name": "message", "cat": "message",
                               "pid": pid, "tid": s["tid"], "ts": s["ts"]})
                    ev.append({"ph": "f", "bp": "e", "id": flow_id, "name": "message",
                               "cat": "message", "pid": pid, "tid": r["tid"],
                               "ts": round(r["ts"] + r["dur"] * 0.999, 3)})
        return {"traceEvents": ev, "displayTimeUnit": "ns",
                "otherData": dict(meta or {}, clock="single host monotonic" if self.single_host
                                  else "per-rank, zeroed at the barrier before the call")}

    def write(self, comm, prov=None):
        """Rank 0 writes the traces to ``self.path``: one Chrome trace (metadata from ``prov``)."""
        if comm.Get_rank() != 0:
            return
        meta = {}
        if prov:
            meta = {k: prov.get(k) for k in ("date", "command", "world_size", "hosts")}
            from .provenance import lib_line
            meta["mpi_library"] = lib_line(prov)
        with open(self.path, "w") as f:
            json.dump(self.chrome(meta), f)
