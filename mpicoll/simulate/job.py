"""One simulated call: record its plans (or write its native action), write traces, replay.

:func:`simulate` is what ``bench simulate`` runs once per (primitive,
algorithm, N, size), in a worker process of its own; :func:`write_traces`
is the part without SimGrid (the tests read its files).
"""
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field

from mpicoll.core.topology import Layout
from mpicoll.sched.inspect import plan_of

from . import native, traces
from .calibrate import NONE
from .replay import replay

__all__ = ["Job", "plan_count", "layout_of_hosts", "write_traces", "simulate", "NATIVE_PREFIX"]

NATIVE_PREFIX = "native["


@dataclass
class Job:
    """One call to simulate (``nbytes``: the bench's size, see :func:`plan_count`)."""

    primitive: str
    algorithm: str            # a registered name, or native[mpich] / native[ompi]
    nranks: int
    nbytes: int
    itemsize: int
    platform: object          # a platforms.Platform
    costs: object = NONE      # a calibrate.LocalCosts
    root: int = 0
    opname: str = "sum"     # bench's op names (units.OP_NAMES)
    timeout: float = 1800.0
    keep: str | None = None          # write the traces here and keep them
    extra: dict = field(default_factory=dict)


def plan_count(primitive, nranks, nbytes, itemsize):
    """(plan count, bench count, block) of the bench's size ``nbytes``.

    The plan count in :func:`~mpicoll.sched.inspect.plan_of`'s unit: one rank's
    block for the blocked primitives (allgather, gather, ...), the whole vector
    otherwise and for reduce_scatter.
    """
    from mpicoll.calls import DEFINED
    spec = DEFINED[primitive].spec
    count, block = spec.layout(nbytes, itemsize, nranks)
    if spec.blocked and primitive != "reduce_scatter":
        return block, count, block
    return count, count, block


def layout_of_hosts(hosts):
    """The node :class:`~mpicoll.core.topology.Layout` of ranks placed on ``hosts``."""
    index = {}
    nodes = [index.setdefault(h, len(index)) for h in hosts]
    if len(index) == len(hosts):
        return Layout(list(range(len(hosts))), "simulated: one rank per host")
    return Layout(nodes, "simulated: ranks sharing a host")


def write_traces(job, directory):
    """Write every rank's trace of ``job`` and the list file; (list path, cfg, info)."""
    N = job.nranks
    paths = [os.path.join(directory, f"rank{r}.ti") for r in range(N)]
    info = {}
    if job.algorithm.startswith(NATIVE_PREFIX):
        selector = job.algorithm[len(NATIVE_PREFIX):-1]
        cfg, alg = native.settings(job.primitive, selector, N, job.nbytes, job.itemsize)
        red = native.reduced_bytes(job.primitive, alg, N, job.nbytes)
        after = job.costs.reduce_s(red) if red else 0.0
        for r in range(N):
            lines = native.actions(job.primitive, r, N, job.nbytes, job.root)
            if after > 0:
                lines.append(f"{r} sleep {after:.12g}")
            traces.write_rank(paths[r], r, lines, job.costs.call_s)
        info["smpi_algorithm"] = alg
    else:
        count, _, _ = plan_count(job.primitive, N, job.nbytes, job.itemsize)
        from mpicoll.core.ops import parse_op
        layout = layout_of_hosts(job.platform.hosts)
        op = parse_op(job.opname)
        msgs = 0
        for r in range(N):
            plan = plan_of(job.primitive, job.algorithm, N, r, count, itemsize=job.itemsize,
                           root=job.root, op=op, layout=layout)
            lines = traces.plan_lines(plan, job.itemsize, job.costs)
            msgs += plan.traffic()[0]
            traces.write_rank(paths[r], r, lines, job.costs.call_s)
        info["messages"] = msgs
        cfg = ()
    return traces.write_list(directory, paths), tuple(cfg), info


def simulate(job):
    """Simulate ``job``: ``{"seconds", "wall_s", ...}`` or ``{"skip": reason}``."""
    t0 = time.monotonic()
    directory = job.keep or tempfile.mkdtemp(prefix="mpicoll-sim-")
    os.makedirs(directory, exist_ok=True)
    try:
        try:
            listfile, cfg, info = write_traces(job, directory)
        except Exception as exc:
            return {"skip": f"{type(exc).__name__}: {exc}"}
        t1 = time.monotonic()
        xml, hostfile = job.platform.write(directory)
        seconds = replay(listfile, xml, hostfile, job.nranks, job.platform.cfg + cfg,
                         timeout=job.timeout)
        return dict(info, seconds=seconds, trace_s=t1 - t0, wall_s=time.monotonic() - t0)
    finally:
        if not job.keep:
            shutil.rmtree(directory, ignore_errors=True)
