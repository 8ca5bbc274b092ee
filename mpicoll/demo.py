"""``mpirun -n 4 python -m mpicoll.demo``: the seed's primitives one by one on mpicoll's hand-written algorithms.

Sections, in the seed's order: broadcast, reduce, all_reduce, gather,
all_gather, scatter, reduce_scatter (each: "Before"/"After" lines per rank in
rank order, checked against the MPI library's own collective on the same
data), the ring allreduce step by step, the barrier experiment, and a
traffic table (elements and messages per rank: measured by
:func:`mpicoll.traffic`, exact from each algorithm's schedule, and the
textbook formula). Any disagreement ends the run with exit status 1; usage
errors exit with 2. Run ``python -m mpicoll.demo --help`` for the flags.
"""
import argparse
import importlib
import sys
import time

import numpy as np
from mpi4py import MPI

from . import distributed as dist
from ._buffers import check_dtype
from ._context import traffic
from ._demo_out import CheckFailed, Out, agree, fmt, same
from ._demo_ring import RingModel, grid_text, plot_ring
from ._demo_table import show_traffic
from ._demo_walk import TITLES, WALKS
from ._errors import ArgumentError
from ._failfast import run_main
from ._registry import algorithms
from . import collectives as C

__all__ = ["main"]

#: The demo's sections in the seed's order; ``alltoall`` only has rows in the traffic table.
SECTIONS = ("bcast", "reduce", "allreduce", "gather", "allgather", "scatter",
            "reduce_scatter", "ring", "barrier")
TABLE = ("bcast", "reduce", "allreduce", "gather", "allgather", "scatter",
         "reduce_scatter", "alltoall", "barrier")
ALIASES = {"broadcast": "bcast", "all_reduce": "allreduce", "all_gather": "allgather",
           "reducescatter": "reduce_scatter", "ring_allreduce": "ring", "all_to_all": "alltoall"}


class UsageError(Exception):
    """A bad flag value (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def _print_message(self, message, file=None):
        if MPI.COMM_WORLD.Get_rank() == 0:
            super()._print_message(message, file)


def build_parser():
    """The command line (help and errors are printed by rank 0 only)."""
    p = _Parser(
        prog="python -m mpicoll.demo",
        description="Walk through the seed's collectives on mpicoll's hand-written algorithms: "
                    "before/after per rank (in rank order, checked against the MPI library's own "
                    "collective), the ring allreduce step by step, the barrier experiment and the "
                    "traffic each algorithm sends (measured vs exact vs textbook). Run it as "
                    "'mpirun -n 4 python -m mpicoll.demo'; any N >= 1 works, plain 'python -m "
                    "mpicoll.demo' is N = 1. Exit status: 0 all checks passed, 1 a result or "
                    "traffic count disagreed, 2 bad flags.")
    p.add_argument("--only", metavar="PRIMITIVE[,...]",
                   help="show only these sections: " + ", ".join(SECTIONS) + ", and alltoall "
                        "(traffic table only); the seed's names broadcast, all_reduce, "
                        "all_gather, ring_allreduce work too. Default: all")
    p.add_argument("--algorithm", metavar="NAME|PRIMITIVE=NAME[,...]",
                   help="algorithm for the walkthrough, the barrier and the traffic table: one "
                        "name for every shown primitive that has it (e.g. ring), or per primitive "
                        "(e.g. allreduce=ring,bcast=pipeline). Default: the library's automatic "
                        "choice in the walkthrough and every hand-written algorithm in the table")
    p.add_argument("--impl", choices=("p2p", "native"), default="p2p",
                   help="p2p: mpicoll's hand-written algorithms (default); native: the MPI "
                        "library's own collectives (their traffic is invisible to mpicoll)")
    p.add_argument("--count", metavar="K", type=int, default=5,
                   help="elements per rank's vector (default 5, the seed's); the traffic table's "
                        "N-block primitives use blocks of ceil(K/N); reduce_scatter keeps the "
                        "seed's 2-element blocks in the walkthrough")
    p.add_argument("--dtype", default="float32",
                   help="NumPy dtype of the data: a float or integer type such as float32 "
                        "(default, the seed's), float64, int32, int64")
    p.add_argument("--root", metavar="R", type=int, default=0,
                   help="root of the rooted primitives: bcast src, reduce/gather dst, scatter src "
                        "(default 0, the seed's)")
    p.add_argument("--sleep-scale", metavar="S", type=float, default=1.0,
                   help="barrier experiment: rank r sleeps r*S seconds (default 1.0, the seed's)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw the ring allreduce steps into FILE.png (needs matplotlib: "
                        "pip install 'mpicoll[plot]')")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colours and Unicode marks; auto: only when rank 0 writes to a terminal "
                        "(mpirun pipes rank output, so under mpirun auto means plain)")
    return p


def _names(text, valid, what):
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        name = ALIASES.get(item.lower(), item.lower())
        if name not in valid:
            raise UsageError(f"--{what}: unknown primitive {item!r}; choose from {', '.join(valid)}")
        out.append(name)
    return out


def resolve(args, size):
    """Check the flags; return (sections shown, table primitives, algorithm per primitive)."""
    if args.count < 1:
        raise UsageError(f"--count: expected K >= 1; got {args.count}")
    if not 0 <= args.root < size:
        raise UsageError(f"--root: expected a rank in [0, {size - 1}]; got {args.root}")
    if args.sleep_scale < 0:
        raise UsageError(f"--sleep-scale: expected S >= 0; got {args.sleep_scale}")
    try:
        dtype = np.dtype(args.dtype)
    except TypeError:
        raise UsageError(f"--dtype: {args.dtype!r} is not a NumPy dtype") from None
    try:
        if dtype.kind not in "iuf":
            raise ArgumentError(f"expected a float or integer dtype; got {dtype}")
        check_dtype("--dtype", dtype)
    except ArgumentError as exc:
        raise UsageError(f"--dtype: {exc}") from None
    shown = _names(args.only, SECTIONS + ("alltoall",), "only") if args.only else list(SECTIONS) + ["alltoall"]
    prims = [p for p in TABLE if p in shown]
    chosen = {}
    if args.algorithm:
        if args.impl == "native":
            raise UsageError("--algorithm picks hand-written algorithms; it does not combine with --impl native")
        items = [t.strip() for t in args.algorithm.split(",") if t.strip()]
        for item in items:
            if "=" in item:
                prim, name = (s.strip() for s in item.split("=", 1))
                prim = _names(prim, TABLE, "algorithm")[0]
                if name not in algorithms(prim):
                    raise UsageError(f"--algorithm: {prim} has no algorithm {name!r}; "
                                     f"choose from {', '.join(algorithms(prim))}")
                chosen[prim] = name
            else:
                hits = [p for p in (prims or TABLE) if item in algorithms(p)]
                if not hits:
                    raise UsageError(f"--algorithm: no shown primitive has an algorithm {item!r}")
                chosen.update((p, item) for p in hits if p not in chosen)
    if args.impl == "native":
        chosen = {p: "native" for p in TABLE}
    return dtype, shown, prims, chosen


# -- sections -----------------------------------------------------------------

def _traffic_line(out, calls, comm):
    """One line: the elements and messages each rank sent in the call just shown."""
    rec = calls[0] if calls else None
    every = comm.gather(None if rec is None else (rec.algorithm, rec.sent_elements, rec.sent_msgs), 0)
    if comm.Get_rank() != 0:
        return None
    algo = next((e[0] for e in every if e), "none")
    if algo == "native":
        return "native", "traffic: inside the MPI library (mpicoll's counters see 0 messages)"
    el = " ".join(str(e[1] if e else 0) for e in every)
    ms = " ".join(str(e[2] if e else 0) for e in every)
    return algo, f"traffic ({algo}): elements sent per rank {el}; messages {ms}"


def show_walk(out, comm, prim, k, dtype, root):
    """One seed primitive: before/after per rank, its traffic, checked against native MPI."""
    step = WALKS[prim](comm, k, dtype, root)
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


def show_ring(out, comm, k, dtype, plot):
    """The ring allreduce: before/after, the step grid (and picture), checked against a real run."""
    rank, n = comm.Get_rank(), comm.Get_size()
    out.heading("ring allreduce step by step: reduce-scatter ring, then allgather ring "
                "(mpicoll.allreduce, algorithm ring)")
    tensor = np.array([rank + 1] * k, dtype=dtype)
    out.ranked(f"Before ring all_reduce on rank {rank}: {fmt(tensor)}")
    ref = np.zeros_like(tensor)
    comm.Allreduce(tensor, ref, MPI.SUM)
    everyone = comm.gather(tensor.copy(), 0)
    with traffic() as t:
        result = C.allreduce(tensor, algorithm="ring")
    problems = [] if same(result, ref) else [f"ring allreduce gave {fmt(result)}, native {fmt(ref)}"]
    agree(comm, problems)
    if n == 1:
        out.say("N = 1: one chunk and no steps; the vector is already reduced.")
    model = RingModel(everyone) if rank == 0 else None
    if rank == 0:
        out.say(grid_text(model, arrows=out.fancy))
    # The model replays the real schedule: same final vectors, same elements per rank.
    results = comm.gather(result, 0)
    sent = comm.gather(t.calls[0].sent_elements, 0)
    if rank == 0:
        model_sent = [sum(model.sizes[sc] for phase, s, moves, _ in model.states[1:]
                          for r2, sc, _ in moves if r2 == r) for r in range(n)]
        if not all(same(m, g) for m, g in zip(model.values, results)) or model_sent != sent:
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
            print("ranks run on different hosts: their clocks are not comparable, order not checked")
        elif first_out < last_in:
            verdict = (f"a rank left the barrier at +{first_out - t0:.4f} s, before the last rank "
                       f"entered at +{last_in - t0:.4f} s")
        else:
            print(f"everyone left together: the last rank entered at +{last_in - t0:.4f} s and all "
                  f"{n} left between +{first_out - t0:.4f} and +{last_out - t0:.4f} s "
                  f"(algorithm {algo}) {out.mark()}")
        sys.stdout.flush()
    verdict = comm.bcast(verdict, 0)
    if verdict:
        raise CheckFailed(verdict)


# -- main ---------------------------------------------------------------------

def _header(out, comm, args, dtype):
    """The run's parameters, and what N = 1 means."""
    n = comm.Get_size()
    impl = ("mpicoll's hand-written algorithms (--impl p2p)" if args.impl == "p2p"
            else "the MPI library's own collectives (--impl native)")
    out.say(f"mpicoll demo: N = {n} rank{'s' if n > 1 else ''}, {impl}, K = {args.count} "
            f"{dtype} elements, root {args.root}")
    out.say(f"MPI: {' '.join(MPI.Get_library_version().split()[:3])}")
    if n == 1:
        out.say("N = 1: a single rank. Every collective is a local copy: nothing is sent, each "
                "result equals the one contribution, the traffic is zero, the ring has no steps "
                "and the barrier nobody to wait for. Run 'mpirun -n 4 python -m mpicoll.demo' "
                "to see communication.")


def main(argv=None):
    """Run the demo; return the exit status (0 ok, 1 a check failed, 2 bad flags)."""
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:           # --help (0) or a usage error (2), same on every rank
        return exc.code
    try:
        dtype, shown, prims, chosen = resolve(args, comm.Get_size())
        if args.plot and "ring" not in shown:
            raise UsageError("--plot draws the ring allreduce: include ring in --only")
        if args.plot:
            missing = None
            if rank == 0:
                try:
                    importlib.import_module("matplotlib")
                except ImportError:
                    missing = ("--plot needs matplotlib, which is not installed: "
                               "pip install matplotlib (or pip install 'mpicoll[plot]')")
            missing = comm.bcast(missing, 0)
            if missing:
                raise UsageError(missing)
    except UsageError as exc:
        if rank == 0:
            print(f"python -m mpicoll.demo: error: {exc}", file=sys.stderr, flush=True)
        return 2
    out = Out(comm, args.color)
    dist.init_process_group(backend=args.impl, algorithms={p: a for p, a in chosen.items()
                                                           if args.impl == "p2p"})
    try:
        _header(out, comm, args, dtype)
        for prim in SECTIONS:
            if prim not in shown:
                continue
            if prim in WALKS:
                show_walk(out, comm, prim, args.count, dtype, args.root)
            elif prim == "ring":
                show_ring(out, comm, args.count, dtype, args.plot)
            else:
                show_barrier(out, comm, args.sleep_scale)
        ring_only = {"allreduce": "ring"} if "ring" in shown and "allreduce" not in shown else {}
        table = prims + (["allreduce"] if ring_only else [])
        table = [p for p in TABLE if p in table]
        if table:
            show_traffic(out, comm, table, chosen, args.count, dtype, args.root, ring_only)
    except CheckFailed as exc:
        if rank == 0:
            sys.stdout.flush()
            print(f"python -m mpicoll.demo: CHECK FAILED: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        dist.destroy_process_group()
    out.say()
    out.say(f"all checks passed {out.mark()}")
    return 0


if __name__ == "__main__":
    run_main(main)
