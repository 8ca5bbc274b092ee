"""``mpirun -n 4 python -m mpicoll.demo``: the seed's primitives one by one on mpicoll's hand-written algorithms.

Sections, in the seed's order: broadcast, reduce, all_reduce, gather,
all_gather, scatter, reduce_scatter (each: "Before"/"After" lines per rank in
rank order, checked against the MPI library's own collective on the same
data), the ring allreduce step by step, the barrier experiment, and a
traffic table (elements and messages per rank: measured by
:func:`mpicoll.traffic`, exact from each algorithm's schedule, and the
textbook formula). Any disagreement ends the run with exit status 1; usage
errors exit with 2. Run ``python -m mpicoll.demo --help`` for the flags.

``--device gpu`` runs the same walkthrough on CuPy arrays: every rank first
checks CuPy locally (no GPU on any rank: every rank ends at once with exit
status 3 and one line naming why), then :func:`mpicoll.gpu.select_device`
puts it on GPU ``local rank % GPUs`` (``MPICOLL_DEVICE`` overrides), and the
header shows each rank's GPU, the CuPy/CUDA versions and the device path
(CUDA-aware MPI or staged through pinned host memory).
"""
import argparse
import importlib
import sys
import time

import numpy as np
from mpi4py import MPI

from . import distributed as dist
from . import gpu
from ._buffers import check_dtype
from ._context import traffic
from ._demo_out import CheckFailed, Out, agree, fmt, host, same
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


class NoDevice(Exception):
    """``--device gpu`` without a usable GPU (exit status 3)."""


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
                    "traffic count disagreed, 2 bad flags, 3 --device gpu without a usable GPU.")
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
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="where the data lives: cpu (NumPy arrays, default) or gpu (CuPy arrays; "
                        "needs pip install 'mpicoll[gpu]'). With gpu each rank uses GPU "
                        "'local rank %% number of GPUs' (several ranks may share one; "
                        "MPICOLL_DEVICE=ID forces a device) and the header shows each rank's GPU, "
                        "the CuPy/CUDA versions and the device path: cuda-aware (device buffers "
                        "handed to MPI) or staged (copied through pinned host memory); "
                        "MPICOLL_CUDA_AWARE=0|1 overrides the detection. No usable GPU on some "
                        "rank: exit status 3 at once, naming why")
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


def _on_host(a):
    return a


def show_walk(out, comm, prim, k, dtype, root, dev=_on_host):
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


def show_ring(out, comm, k, dtype, plot, dev=_on_host):
    """The ring allreduce: before/after, the step grid (and picture), checked against a real run."""
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
    problems = [] if same(result, ref) else [f"ring allreduce gave {fmt(result)}, native {fmt(ref)}"]
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


# -- --device gpu ---------------------------------------------------------------

def _cuda_version(v):
    return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) and v > 0 else "unknown"


def _gpu_facts(cupy, dev):
    """CuPy/CUDA versions and the device's name (each 'unknown' where CuPy cannot say)."""
    facts = {"cupy": getattr(cupy, "__version__", "unknown"), "runtime": "unknown",
             "driver": "unknown", "name": "unknown"}
    rt = getattr(getattr(cupy, "cuda", None), "runtime", None)
    for key, call in (("runtime", lambda: _cuda_version(rt.runtimeGetVersion())),
                      ("driver", lambda: _cuda_version(rt.driverGetVersion())),
                      ("name", lambda: _text(rt.getDeviceProperties(dev)["name"]))):
        try:
            facts[key] = call()
        except Exception:  # noqa: BLE001 - a header fact, never a reason to fail
            pass
    return facts


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def use_device(comm, device):
    """``--device``: None for cpu; for gpu a dict (dev: host array -> CuPy array, and what each rank uses).

    Collective. Every rank checks CuPy on its own first and the verdicts are
    exchanged, so without a usable GPU anywhere every rank raises
    :class:`NoDevice` at the same point (rank 0 prints it) before any
    device work starts.
    """
    if device != "gpu":
        return None
    why = gpu.no_gpu_reason(comm)
    if why:
        raise NoDevice(f"--device gpu: {why}", True)
    try:
        sel = gpu.select_device(comm)          # collective: every rank gets here
    except RuntimeError as exc:
        raise NoDevice(f"--device gpu: rank {comm.Get_rank()}: {exc}", False) from None
    import cupy
    path = gpu.device_path()
    mine = dict(sel, host=MPI.Get_processor_name(), path=path["path"], source=path["source"],
                **_gpu_facts(cupy, sel["device"]))
    return {"dev": cupy.asarray, "ranks": comm.gather(mine, 0)}


def _ranks_text(ranks):
    """0,1,2,5 -> '0-2,5'."""
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(parts)


def _device_header(out, ranks):
    """Rank 0: CuPy/CUDA versions, which GPU each rank uses (grouped), the device path."""
    first = ranks[0]
    versions = sorted({(r["cupy"], r["runtime"], r["driver"]) for r in ranks})
    out.say("device: --device gpu (CuPy arrays); " + "; ".join(
        f"CuPy {c}, CUDA runtime {rt}, driver {d}" for c, rt, d in versions))
    groups = {}
    for rank, r in enumerate(ranks):
        groups.setdefault((r["host"], r["device"], r["name"]), []).append(rank)
    hows = sorted({r["how"] for r in ranks})
    lines = [f"GPU {dev} ({name}) on {h}: rank{'s' if len(rs) > 1 else ''} {_ranks_text(rs)}"
             for (h, dev, name), rs in sorted(groups.items(), key=lambda kv: kv[1][0])]
    shared = [len(rs) for rs in groups.values() if len(rs) > 1]
    how = ("forced by " + ", ".join(hows) if any(h in ("MPICOLL_DEVICE", "device argument") for h in hows)
           else f"local rank % GPUs per node, local rank from {', '.join(hows)}")
    out.say(f"GPUs ({how}; {first['device_count']} visible per node"
            + (f"; {max(shared)} ranks share a GPU" if shared else "") + "):")
    for line in lines:
        out.say(f"  {line}")
    paths = sorted({(r["path"], r["source"]) for r in ranks})
    for path, source in paths:
        what = ("device buffers handed to MPI directly" if path == "cuda-aware"
                else "every message copied through reusable pinned host buffers")
        who = "" if len(paths) == 1 else " on ranks " + _ranks_text(
            [i for i, r in enumerate(ranks) if (r["path"], r["source"]) == (path, source)])
        out.say(f"device path: {path}{who}: {what} (decided by {source}); "
                f"the native reference runs on host copies of the same data")


# -- main ---------------------------------------------------------------------

def _header(out, comm, args, dtype, device=None):
    """The run's parameters, the devices used, and what N = 1 means."""
    n = comm.Get_size()
    impl = ("mpicoll's hand-written algorithms (--impl p2p)" if args.impl == "p2p"
            else "the MPI library's own collectives (--impl native)")
    out.say(f"mpicoll demo: N = {n} rank{'s' if n > 1 else ''}, {impl}, K = {args.count} "
            f"{dtype} elements, root {args.root}")
    out.say(f"MPI: {' '.join(MPI.Get_library_version().split()[:3])}")
    if device is not None and comm.Get_rank() == 0:
        _device_header(out, device["ranks"])
    if n == 1:
        out.say("N = 1: a single rank. Every collective is a local copy: nothing is sent, each "
                "result equals the one contribution, the traffic is zero, the ring has no steps "
                "and the barrier nobody to wait for. Run 'mpirun -n 4 python -m mpicoll.demo' "
                "to see communication.")


def main(argv=None):
    """Run the demo; return the exit status (0 ok, 1 a check failed, 2 bad flags, 3 no GPU)."""
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
    try:
        device = use_device(comm, args.device)
    except NoDevice as exc:
        message, everyone_knows = exc.args
        if rank == 0 or not everyone_knows:
            print(f"python -m mpicoll.demo: error: {message}", file=sys.stderr, flush=True)
        return 3
    dev = device["dev"] if device else _on_host
    out = Out(comm, args.color)
    dist.init_process_group(backend=args.impl, algorithms={p: a for p, a in chosen.items()
                                                           if args.impl == "p2p"})
    try:
        _header(out, comm, args, dtype, device)
        for prim in SECTIONS:
            if prim not in shown:
                continue
            if prim in WALKS:
                show_walk(out, comm, prim, args.count, dtype, args.root, dev)
            elif prim == "ring":
                show_ring(out, comm, args.count, dtype, args.plot, dev)
            else:
                show_barrier(out, comm, args.sleep_scale)
        ring_only = {"allreduce": "ring"} if "ring" in shown and "allreduce" not in shown else {}
        table = prims + (["allreduce"] if ring_only else [])
        table = [p for p in TABLE if p in table]
        if table:
            show_traffic(out, comm, table, chosen, args.count, dtype, args.root, ring_only, dev)
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
