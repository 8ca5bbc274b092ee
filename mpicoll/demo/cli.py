"""Command line of ``python -m mpicoll.demo``: flags, checks, the run in order, the exit status."""
import argparse
import importlib
import sys

import numpy as np
from mpi4py import MPI

from .. import distributed as dist
from ..args.buffers import check_dtype
from ..core.errors import ArgumentError
from ..core.plugins import PluginError, import_modules
from ..core.registry import PRIMITIVES, algorithms, lookup
from ..core.topology import layout
from ..engine.context import private_comm
from .device import NoDevice, device_header, use_device
from .nodes import show_nodes
from .output import CheckFailed, Out, on_host
from .sections import show_barrier, show_ring, show_walk
from .table import show_traffic
from .walk import WALKS

__all__ = ["main", "build_parser", "resolve", "UsageError", "SECTIONS", "TABLE", "BUILTIN",
           "plugin_primitives"]

#: The demo's sections in the seed's order (then scan, which the seed leaves out, the ring
#: step by step, the node-aware allreduce, the barrier); ``alltoall`` only has rows in the
#: traffic table.
SECTIONS = ("bcast", "reduce", "allreduce", "gather", "allgather", "scatter",
            "reduce_scatter", "scan", "ring", "nodes", "barrier")
# The vector collectives (and scan) are not in the traffic table: it compares measured
# counts with the textbook claims the algorithms declare (register(..., textbook=...)),
# which the seed's nine primitives' algorithms have.
TABLE = ("bcast", "reduce", "allreduce", "gather", "allgather", "scatter",
         "reduce_scatter", "alltoall", "barrier")
#: The primitives mpicoll defines itself; any other (defined by an ``--import``ed plug-in)
#: gets rows in the traffic table, checked against its spec's exact results.
BUILTIN = tuple(PRIMITIVES)
ALIASES = {"broadcast": "bcast", "all_reduce": "allreduce", "all_gather": "allgather",
           "reducescatter": "reduce_scatter", "ring_allreduce": "ring", "all_to_all": "alltoall"}


def plugin_primitives():
    """The primitives defined by plug-ins (``--import``), in definition order."""
    return tuple(p for p in PRIMITIVES if p not in BUILTIN)


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
                    "collective), then mpicoll's scan, the ring allreduce step by step, the "
                    "node-aware allreduce, the barrier experiment and the traffic each "
                    "algorithm sends (measured vs exact vs textbook). Run it as "
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
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module or .py file first, e.g. one registering an algorithm "
                        "with @mpicoll.register: it then takes part like the built-in ones "
                        "(walkthrough with --algorithm, traffic table); repeatable")
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
            raise UsageError(f"--{what}: unknown primitive {item!r}; "
                             f"choose from {', '.join(valid)}")
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
    extra = plugin_primitives()
    shown = (_names(args.only, SECTIONS + ("alltoall",) + extra, "only") if args.only
             else list(SECTIONS) + ["alltoall", *extra])
    prims = [p for p in TABLE + extra if p in shown]
    chosen = {}
    if args.algorithm:
        if args.impl == "native":
            raise UsageError("--algorithm picks hand-written algorithms; it does not combine "
                             "with --impl native")
        items = [t.strip() for t in args.algorithm.split(",") if t.strip()]
        for item in items:
            if "=" in item:
                prim, name = (s.strip() for s in item.split("=", 1))
                prim = _names(prim, TABLE + ("scan",) + extra, "algorithm")[0]
                if name.partition(":")[0] not in algorithms(prim):
                    raise UsageError(f"--algorithm: {prim} has no algorithm {name!r}; "
                                     f"choose from {', '.join(algorithms(prim))}")
                try:
                    lookup(prim, name)          # options, e.g. hierarchical:intra=linear
                except ArgumentError as exc:
                    raise UsageError(f"--algorithm: {exc}") from None
                chosen[prim] = name
            else:
                pool = (prims or list(TABLE + extra)) + (["scan"] if "scan" in shown else [])
                hits = [p for p in pool if item in algorithms(p)]
                if not hits:
                    raise UsageError(f"--algorithm: no shown primitive has an algorithm {item!r}")
                chosen.update((p, item) for p in hits if p not in chosen)
    if args.impl == "native":
        chosen = {p: "native" for p in TABLE}
    return dtype, shown, prims, chosen


def _header(out, comm, args, dtype, device=None):
    """The run's parameters, the devices used, and what N = 1 means."""
    n = comm.Get_size()
    impl = ("mpicoll's hand-written algorithms (--impl p2p)" if args.impl == "p2p"
            else "the MPI library's own collectives (--impl native)")
    out.say(f"mpicoll demo: N = {n} rank{'s' if n > 1 else ''}, {impl}, K = {args.count} "
            f"{dtype} elements, root {args.root}")
    out.say(f"MPI: {' '.join(MPI.Get_library_version().split()[:3])}")
    lay = layout(private_comm(comm))
    if lay.n_nodes > 1:
        out.say(f"nodes: {lay.describe()}")
    if device is not None and comm.Get_rank() == 0:
        device_header(out, device["ranks"])
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
        import_modules(args.imports)    # before resolve: --algorithm may name a plug-in's
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
    except (UsageError, PluginError) as exc:
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
    dev = device["dev"] if device else on_host
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
            elif prim == "nodes":
                show_nodes(out, comm, args.count, dtype, dev)
            else:
                show_barrier(out, comm, args.sleep_scale)
        ring_only = {"allreduce": "ring"} if "ring" in shown and "allreduce" not in shown else {}
        table = prims + (["allreduce"] if ring_only else [])
        table = [p for p in TABLE + plugin_primitives() if p in table]
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
