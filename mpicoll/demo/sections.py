"""The demo's sections: a seed primitive walked through, the ring step by step, the barrier.

Each ``show_*`` function runs on every rank; rank 0 prints (through
:class:`~mpicoll.demo.output.Out`) and a disagreement with the reference
raises :class:`~mpicoll.demo.output.CheckFailed` on every rank.
"""
import sys
import time

import numpy as np
from mpi4py import MPI

from .. import api as C
from .. import distributed as dist
from ..engine.context import traffic
from .output import CheckFailed, agree, fmt, host, on_host, same
from .ring import RingModel, grid_text, plot_ring
from .walk import TITLES, WALKS

__all__ = ["show_walk", "show_ring", "show_barrier"]


def _traffic_line(out, calls, comm):
    """One line: the elements and messages each rank sent in the call just shown."""
    rec = calls[0] if calls else None
    every = comm.gather(None if rec is None else (rec.algorithm, rec.sent_elements, rec.sent_msgs,
                                                  getattr(rec, "path", "host")), 0)
    if comm.Get_rank() != 0:
        return None
    algo = next((e[0] for e in every if e), "none")
    # Device arrays: which path their messages took (cuda-aware or staged), as recorded per call.
    paths = sorted({e[3] for e in every if e and e[3] != "host"})
    path = f"{'/'.join(paths)} path" if paths else ""
    via = f", {path}" if path else ""
    if algo == "native":
        return "native", (f"traffic{f' ({path})' if path else ''}: inside the MPI library "
                          f"(mpicoll's counters see 0 messages)")
    el = " ".join(str(e[1] if e else 0) for e in every)
    ms = " ".join(str(e[2] if e else 0) for e in every)
    return algo, f"traffic ({algo}{via}): elements sent per rank {el}; messages {ms}"


def show_walk(out, comm, prim, k, dtype, root, dev=on_host):
    """One seed primitive: before/after per rank, its traffic, checked against native MPI."""
    step = WALKS[prim](comm, k, dtype, root, dev)
    agree(comm, step.problems)
    line = _traffic_line(out, step.traffic, comm)
    algo = comm.bcast(line[0] if line else None, 0)
    out.heading(TITLES[prim].format(root=root) + f", algorithm {algo}")
    out.ranked("\n".join(step.lead) if step.lead else None)    # the root's lead lines
    out.ranked(step.before)
    out.say()
    out.ranked(step.after)
    if line:
        out.say(line[1])
    out.say(f"check: equals the native MPI collective on every rank {out.mark()}")


def show_ring(out, comm, k, dtype, plot, dev=on_host):
    """The ring allreduce: before/after, the step grid (and picture), checked against a run."""
    rank, n = comm.Get_rank(), comm.Get_size()
    out.heading("ring allreduce step by step: reduce-scatter ring, then allgather ring "
                "(mpicoll.allreduce, algorithm ring)")
    mine = np.array([rank + 1] * k, dtype=dtype)
    tensor = dev(mine.copy())
    out.ranked(f"Before ring all_reduce on rank {rank}: {fmt(tensor)}")
    ref = np.zeros_like(mine)
    comm.Allreduce(mine, ref, MPI.SUM)
    everyone = comm.gather(mine.copy(), 0)
    with traffic() as t:
        result = C.allreduce(tensor, algorithm="ring")
    problems = ([] if same(result, ref)
                else [f"ring allreduce gave {fmt(result)}, native {fmt(ref)}"])
    agree(comm, problems)
    if n == 1:
        out.say("N = 1: one chunk and no steps; the vector is already reduced.")
    model = RingModel(everyone) if rank == 0 else None
    if rank == 0:
        out.say(grid_text(model, arrows=out.fancy))
    # The model replays the real schedule: same final vectors, same elements per rank.
    results = comm.gather(host(result), 0)
    sent = comm.gather(t.calls[0].sent_elements, 0)
    if rank == 0:
        model_sent = [sum(model.sizes[sc] for phase, s, moves, _ in model.states[1:]
                          for r2, sc, _ in moves if r2 == r) for r in range(n)]
        if (not all(same(m, g) for m, g in zip(model.values, results, strict=False))
                or model_sent != sent):
            problems = ["the step model disagrees with the real ring run"]
    agree(comm, problems)
    out.say()
    out.ranked(f"After ring all_reduce on rank {rank}: {fmt(result)}")
    out.say(f"check: equals the native MPI allreduce on every rank, and the step model matches "
            f"the real run (final vectors and elements sent per rank) {out.mark()}")
    if plot:
        if rank == 0:
            plot_ring(model, plot)
        out.say(f"ring steps drawn into {plot}")


def show_barrier(out, comm, scale):
    """The seed's sleep(rank) experiment: how long each rank waited, and that nobody left early."""
    rank, n = comm.Get_rank(), comm.Get_size()
    out.heading(f"barrier: rank r sleeps r*{scale:g} s, then dist.barrier()")
    comm.Barrier()                      # a common start, so waits are comparable
    t_start = time.monotonic()
    out.ranked(f"Rank {rank} sleeps {rank * scale:g} seconds.")
    time.sleep(rank * scale)
    enter = time.monotonic()
    with traffic() as t:
        dist.barrier()
    leave = time.monotonic()
    algo = t.calls[0].algorithm if t.calls else "none (N = 1)"
    out.say()
    out.ranked(f"Rank {rank} after barrier time delta: {leave - t_start:.4f}")
    host = MPI.Get_processor_name()
    every = comm.gather((host, enter, leave), 0)
    verdict = None
    if rank == 0:
        t0 = min(e[1] for e in every)
        last_in = max(e[1] for e in every)
        first_out, last_out = min(e[2] for e in every), max(e[2] for e in every)
        for r, (_, a, b) in enumerate(every):
            print(f"Rank {r} entered at +{a - t0:.4f} s, waited {b - a:.4f} s in the barrier, "
                  f"left at +{b - t0:.4f} s")
        if n == 1:
            print("N = 1: nobody to wait for; the barrier returns at once.")
        if len({e[0] for e in every}) > 1:
            print("ranks run on different hosts: their clocks are not comparable, "
                  "order not checked")
        elif first_out < last_in:
            verdict = (f"a rank left the barrier at +{first_out - t0:.4f} s, before the last rank "
                       f"entered at +{last_in - t0:.4f} s")
        else:
            print(f"everyone left together: the last rank entered at +{last_in - t0:.4f} s "
                  f"and all {n} left between +{first_out - t0:.4f} and +{last_out - t0:.4f} s "
                  f"(algorithm {algo}) {out.mark()}")
        sys.stdout.flush()
    verdict = comm.bcast(verdict, 0)
    if verdict:
        raise CheckFailed(verdict)
