"""The measuring commands (a primitive, or ``all``): provenance, sweep, trace, files."""
import os
import sys
import time

import mpicoll
from mpicoll.core.plugins import PluginError, import_modules
from mpicoll.core.registry import PRIMITIVES

from .units import parse_op

__all__ = ["run", "prepare", "start", "native_plan"]


def prepare(args):
    """Settings every measuring command shares; returns the bench communicator.

    Also sets ``args.array_module`` (with ``--xp cupy``: every rank's GPU
    selected, collectively, before the provenance is collected).
    """
    try:
        import_modules(getattr(args, "imports", []))
    except PluginError as exc:
        raise SystemExit(str(exc)) from None
    from mpi4py import MPI
    args.op = parse_op(args.opname)
    if not 0 <= args.root < MPI.COMM_WORLD.Get_size():
        raise SystemExit(f"-r/--root: expected a rank in [0, {MPI.COMM_WORLD.Get_size() - 1}]; "
                         f"got {args.root}")
    if args.iters < 1 or args.warmup < 0:
        raise SystemExit("-n/--iters must be >= 1 and -w/--warmup >= 0")
    for name, default in (("algorithms", ["all"]), ("memcpy", True), ("progress", "auto")):
        if not hasattr(args, name):        # fit and tune have no such options
            setattr(args, name, default)
    comm = MPI.COMM_WORLD.Dup()
    # Measure the algorithm, not the agreement step; the check pass turns it back on.
    # Set on the bench's own communicator, so the user's MPICOLL_CHECK and other
    # communicators are left as they are.
    mpicoll.set_check(comm, "local")
    from .specs import ArrayModule
    args.array_module = ArrayModule(args.xp, comm, getattr(args, "device", None),
                                    getattr(args, "shared_result", False))
    return comm


def start(args):
    """The common start of ``fit`` and ``tune``: returns (primitives, comm, prov).

    Their ``--primitive`` list checked, the bench communicator, and the provenance record.
    """
    from .provenance import collect
    comm = prepare(args)                 # first: plug-ins may define primitives
    prims = list(PRIMITIVES) if args.primitive == ["all"] else args.primitive
    for p in prims:
        if p not in PRIMITIVES:
            comm.Free()
            raise SystemExit(f"--primitive: unknown primitive {p!r}")
    return prims, comm, collect(comm, provenance_extra(args, prims))


def provenance_extra(args, primitives, native=None, nccl=None, torch=None):
    """The run's settings for the provenance record: sweep, buffers (GPUs), NCCL/torch columns."""
    from .harness import CHECK_NOTE
    extra = {"mpicoll_check": CHECK_NOTE, "timing": args.timing, "xp": args.xp,
             "primitives": list(primitives), "dtype": args.dtype.name, "op": args.opname,
             "root": args.root, "iters": args.iters, "warmup": args.warmup,
             "large_bytes": args.large_bytes, "native_algorithm_requested": native or {}}
    am = getattr(args, "array_module", None)
    if am is not None:
        extra.update(am.provenance())
    if nccl is not None:
        extra["nccl"] = nccl.info()
    for label, col in (torch or {}).items():
        extra[label] = col.info()
    return extra


def native_plan(items, primitives):
    """``--native-algorithm``: ['ring', 'bcast=binomial'] -> {primitive: [names]}."""
    plan = {}
    for item in items:
        if "=" in item:
            prim, name = item.split("=", 1)
            if prim not in PRIMITIVES:
                raise SystemExit(f"--native-algorithm: unknown primitive {prim!r}")
            targets = [prim] if prim in primitives else []
        else:
            name, targets = item, primitives
        for p in targets:
            plan.setdefault(p, []).append(name)
    return plan


def run(args):
    """The measuring commands (``PRIMITIVE|all``); exit status 1 when some row was wrong."""
    from .harness import Sweep
    from .provenance import collect, header_lines
    from .results import Sink

    comm = prepare(args)                 # first: plug-ins may define primitives
    primitives = list(PRIMITIVES) if args.command == "all" else [args.command]
    rank = comm.Get_rank()
    native = native_plan(args.native_algorithm, primitives)
    sink = Sink(rank, args.output, args.csv)
    from . import nccl as ncclcol
    column = ncclcol.setup(comm, args.array_module, args.dtype) if ncclcol.wanted(args) else None
    from . import torchdist
    labels = torchdist.wanted(args)
    torch_cols, close_torch = torchdist.setup(comm, args.array_module, args.dtype, args.opname,
                                              labels) if labels else ({}, lambda: None)
    prov = collect(comm, provenance_extra(args, primitives, native, column, torch_cols))
    sink.write(prov)
    if rank == 0:
        for line in header_lines(prov):
            print(line)
    tracer = None
    if args.trace:
        from .trace import Tracer
        tracer = Tracer(args.trace, args.trace_bytes)
    start = time.monotonic()
    sweep = Sweep(args, comm, sink, echo=lambda s: print(s, flush=True),
                  native_forced=native, tracer=tracer, nccl=column, torch=torch_cols)
    wrong = sweep.run(primitives)
    if column is not None:
        column.close()
    close_torch()
    if tracer is not None:
        tracer.write(comm, prov)
    end = {"type": "end", "elapsed_s": time.monotonic() - start, "total_wrong": wrong,
           "loadavg_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
           "native_forced": sweep.forced_settings[:1] + [
               s for i, s in enumerate(sweep.forced_settings[1:], 1)
               if s not in sweep.forced_settings[:i]]}
    for label, col in (("nccl", column), *torch_cols.items()):
        if col is not None:
            end[label] = dict(col.info(), primitives_skipped=dict(sweep.ref_skips.get(label, [])))
    sink.write(end)
    sink.close()
    if rank == 0:
        bws = [r["busbw_GBps"] for r in sweep.records if r["busbw_GBps"] is not None]
        print(f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}")
        if bws:
            print(f"# Avg bus bandwidth    : {sum(bws) / len(bws):.4f} GB/s")
        if tracer is not None:
            print(f"# trace written to {args.trace}")
        sys.stdout.flush()
    comm.Free()
    return 1 if wrong else 0
