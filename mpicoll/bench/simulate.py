r"""``simulate``: every algorithm's call replayed by SimGrid/SMPI on a described cluster.

::

    python -m mpicoll.bench simulate --primitive allreduce,bcast --ranks 64,1024 \
        --sizes 8,64K,16M --platform fattree:bw=100Gbps,lat=1us -J sim.jsonl --plot sim.png

Each (primitive, algorithm, N, size) is one replay (:mod:`mpicoll.simulate`):
the hand-written algorithms' verified plans as time-independent traces, the
MPI library's collectives as SMPI's (``native[mpich]``, ``native[ompi]``).
Rows are the measured sweeps' records (``report``, ``plot`` read them), with
``"simulated": true``, the platform, and ``time_us`` the simulated time of
one call (min = avg = max: the simulation is deterministic). Replays run in
parallel (``-j``, default: the CPUs); progress goes to stderr on long sweeps.
Needs SimGrid (``apt-get install -y libsimgrid-dev``); without it the command
stops at once, naming that command.
"""
import concurrent.futures as cf
import datetime
import multiprocessing
import os
import platform as _pyplatform
import shlex
import sys
import time

from mpicoll import algorithms
from mpicoll.core.plugins import PluginError, import_modules

from .units import OP_NAMES, parse_dtype, parse_range, parse_size, size_sweep

__all__ = ["add_parser", "main", "plan_jobs", "record_of", "write_tuning"]

DEFAULT_PRIMITIVES = ("allreduce", "bcast", "allgather", "reduce_scatter")
NATIVE = ("native[mpich]", "native[ompi]")


def _ranks(text):
    got = parse_range(text)
    got = got if isinstance(got, list) else [got]
    if not got or any(n < 1 for n in got):
        raise ValueError(f"--ranks: expected rank counts >= 1 (e.g. 16,64,1024 or 2..64); "
                         f"got {text!r}")
    return sorted(set(got))


def add_parser(sub):
    """Add the ``simulate`` command to ``sub`` (the bench's subcommands)."""
    p = sub.add_parser("simulate", help="replay every algorithm in SimGrid/SMPI on a described "
                                        "cluster (simulated rows)",
                       description="Every algorithm's call replayed by SimGrid/SMPI on a "
                                   "described cluster: the hand-written algorithms' verified "
                                   "plans as traces, the MPI libraries' collectives as SMPI's "
                                   "(native[mpich], native[ompi]). Needs SimGrid "
                                   "(libsimgrid-dev, smpirun).")
    p.add_argument("--primitive", default=",".join(DEFAULT_PRIMITIVES), metavar="LIST",
                   help="comma list of primitives (default %(default)s)")
    p.add_argument("--algorithm", "-a", default="all", metavar="LIST",
                   help="comma list: hand-written names, native[mpich], native[ompi]; all: "
                        "every hand-written algorithm with a plan and both natives (default)")
    p.add_argument("--ranks", "-N", default="16", metavar="LIST",
                   help="rank counts: 16,64,1024 or 2..64 (default 16)")
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="16M")
    p.add_argument("-f", "--stepfactor", type=float, default=64.0)
    p.add_argument("--sizes", default=None, metavar="LIST",
                   help="these sizes instead of -b/-e/-f (e.g. 8,1K,64K,1M,16M)")
    p.add_argument("-d", "--dtype", default="float")
    p.add_argument("-o", "--op", dest="opname", default="sum", choices=OP_NAMES)
    p.add_argument("-r", "--root", type=int, default=0)
    p.add_argument("--platform", default="fattree:bw=100Gbps,lat=1us",
                   help="an SMPI platform .xml (with --hostfile) or a preset: "
                        "crossbar:bw=,lat= | fattree:bw=,lat=,leaf=,up= | "
                        "nodes:K=,bw=,lat=,intra_bw=,intra_lat=,bb= | machine:model=FILE "
                        "(default %(default)s; see docs/guide/simulate.rst)")
    p.add_argument("--hostfile", help="with an .xml platform: one host a line, rank order")
    p.add_argument("--network-model", default="CM02", choices=("CM02", "SMPI", "LV08"),
                   help="SimGrid's network model (default CM02: latency + bytes/bandwidth)")
    p.add_argument("--calibration", default="measured", metavar="measured|none|FILE",
                   help="local work's durations: measured (this project's figures), none "
                        "(communication only), or a JSON file of "
                        "`python -m mpicoll.simulate.calibrate`")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                   help="replays at once (default: the CPUs, %(default)s)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per replay")
    p.add_argument("--keep-traces", metavar="DIR", help="keep each replay's files under DIR")
    p.add_argument("-J", "--output", metavar="FILE", help="results as JSON lines")
    p.add_argument("--csv", metavar="FILE", help="results as CSV")
    p.add_argument("--plot", metavar="FILE.png", help="time and busbw vs size per algorithm")
    p.add_argument("--tuning", metavar="FILE.json",
                   help="also write an MPICOLL_TUNING table from the simulated times (the "
                        "fastest hand-written algorithm per size and N, as `tune` does), "
                        "labelled simulated, with its platform")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    p.set_defaults(func=main)


def _costs(text):
    from mpicoll.simulate import calibrate
    if text == "measured":
        return calibrate.MEASURED
    if text == "none":
        return calibrate.NONE
    return calibrate.load(text)


def _platform(args, n):
    from mpicoll.simulate import platforms
    p = platforms.parse(args.platform, n, args.hostfile)
    if args.network_model != "CM02":
        p.cfg = tuple(c for c in p.cfg if not c.startswith("--cfg=network/model:")) + \
            (f"--cfg=network/model:{args.network_model}",)
    return p


def _algorithms(primitive, requested):
    """The labels to simulate for ``primitive``: the requested names it has."""
    from mpicoll.bench.plan_prices import plannable
    from mpicoll.simulate.native import PRIMITIVES as NATIVE_PRIMS
    hand = [a for a in algorithms(primitive) if a != "native"]
    natives = list(NATIVE) if primitive in NATIVE_PRIMS else []
    if requested == ["all"]:
        return [a for a in hand if plannable(primitive, a) or a == "hierarchical"] + natives
    return [a for a in requested if a in hand or a in natives]


def _check_names(prims, requested):
    if requested == ["all"]:
        return
    known = set(NATIVE)
    for p in prims:
        known.update(algorithms(p))
    for a in requested:
        if a not in known or a == "native":
            raise ValueError(f"--algorithm: no primitive of {', '.join(prims)} has an algorithm "
                             f"{a!r}; expected names like ring, binomial, native[mpich], "
                             f"native[ompi]")


def plan_jobs(args):
    """Every :class:`~mpicoll.simulate.job.Job` of the sweep, largest first."""
    from mpicoll.simulate.job import Job
    dtype = parse_dtype(args.dtype)
    sizes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else \
        size_sweep(parse_size(args.minbytes), parse_size(args.maxbytes), args.stepfactor)
    costs = _costs(args.calibration)
    jobs = []
    prims = [p.strip() for p in args.primitive.split(",") if p.strip()]
    requested = [a.strip() for a in args.algorithm.split(",") if a.strip()]
    for p in prims:
        if p not in _primitives():
            raise ValueError(f"--primitive: unknown primitive {p!r}")
    _check_names(prims, requested)
    for n in _ranks(args.ranks):
        plat = _platform(args, n)
        if not 0 <= args.root < n:
            raise ValueError(f"-r/--root: expected a rank in [0, {n - 1}]; got {args.root}")
        for p in prims:
            for a in _algorithms(p, requested):
                for s in sizes:
                    jobs.append(Job(p, a, n, s, dtype.itemsize, plat, costs, args.root,
                                    args.opname, args.timeout,
                                    os.path.join(args.keep_traces, f"{p}-{a}-N{n}-{s}")
                                    if args.keep_traces else None,
                                    {"dtype": dtype.name}))
    jobs.sort(key=lambda j: -j.nranks)
    return jobs


def _primitives():
    from mpicoll.core.registry import PRIMITIVES
    return PRIMITIVES


def record_of(job, out):
    """A result record (the measured sweeps' fields) of one simulated job."""
    from mpicoll import default_algorithm
    from mpicoll.simulate.job import plan_count

    from .specs import busbw_factor
    p, N = job.primitive, job.nranks
    _, count, block = plan_count(p, N, job.nbytes, job.itemsize)
    nbytes = count * job.itemsize
    from .specs import SPECS
    call_count = block if SPECS[p].blocked else count
    us = out["seconds"] * 1e6
    factor = busbw_factor(p, N)
    algbw = nbytes / us / 1e3 if nbytes and us > 0 else None
    reduces = SPECS[p].reduces
    try:
        auto = default_algorithm(p, size=N, nbytes=call_count * job.itemsize, count=call_count,
                                 commutative=job.opname != "noncomm")
    except Exception as exc:
        auto = f"error: {exc}"
    return {"type": "result", "primitive": p, "algorithm": job.algorithm, "nranks": N,
            "bytes": nbytes, "count": count, "block_count": block,
            "call_nbytes": call_count * job.itemsize, "dtype": job.extra.get("dtype"),
            "op": job.opname if reduces else None, "root": job.root if SPECS[p].rooted else None,
            "iters": 1, "warmup": 0, "timing": "simulated", "xp": "simulated",
            "path": "smpi", "moved_by": None,
            "time_us": {"avg": us, "min": us, "max": us}, "algbw_GBps": algbw,
            "busbw_GBps": None if algbw is None or factor is None else algbw * factor,
            "busbw_factor": factor, "wrong": None, "checked": False, "memcpy_GBps": None,
            "native_forced": None, "auto": auto, "vs_raw": None,
            "simulated": True, "platform": job.platform.describe(),
            "smpi_algorithm": out.get("smpi_algorithm"), "messages": out.get("messages"),
            "replay_wall_s": out.get("wall_s"), "trace_s": out.get("trace_s")}


def _simgrid_version():
    import subprocess
    try:
        p = subprocess.run(["smpirun", "-version"], capture_output=True, text=True, timeout=30)
        return (p.stdout + p.stderr).strip().splitlines()[0]
    except Exception:
        return None


def provenance(args, jobs):
    """The run's provenance record (read by ``report``/``plot`` like a measured run's)."""
    import numpy

    from mpicoll.simulate.calibrate import LocalCosts
    costs = jobs[0].costs if jobs else LocalCosts()
    version = _simgrid_version()
    return {"type": "provenance", "simulated": True,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python -m mpicoll.bench " + shlex.join(sys.argv[1:]),
            "world_size": sorted({j.nranks for j in jobs}),
            "hosts": {"simulated": max((j.nranks for j in jobs), default=0)},
            "mpi_library": f"SimGrid SMPI replay ({version})", "mpi4py": None,
            "numpy": numpy.__version__, "python": _pyplatform.python_version(),
            "platform_arg": args.platform, "network_model": args.network_model,
            "calibration": costs.to_json(), "cpu_count": os.cpu_count(), "jobs": args.jobs,
            "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "mpi_env": {}}


def write_tuning(args, prov, records):
    """Write ``--tuning``: :func:`.tune.build_rules` per N on the simulated records."""
    import json

    from mpicoll.core.defaults import TABLE_FORMAT

    from .tune import build_rules
    table = {"format": TABLE_FORMAT,
             "label": f"SIMULATED (SimGrid/SMPI replay), not measured: platform {args.platform}, "
                      f"network model {args.network_model}, local costs "
                      f"{prov['calibration']['source']}",
             "created": prov["date"], "rules": {}, "measurements": {}, "provenance": {}}
    for n in sorted({r["nranks"] for r in records}):
        rules, evidence = build_rules([r for r in records if r["nranks"] == n])
        for prim, ranges in rules.items():
            table["rules"].setdefault(prim, {})[str(n)] = ranges
            table["measurements"].setdefault(prim, {})[str(n)] = evidence[prim]
        table["provenance"][str(n)] = {k: prov[k] for k in (
            "date", "command", "mpi_library", "platform_arg", "network_model", "calibration")}
    with open(args.tuning, "w") as f:
        json.dump(table, f, indent=1)


def _run_one(job):
    from mpicoll.simulate.job import simulate
    try:
        return simulate(job)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def main(args):
    """Run ``simulate``; 0, or 1 when some replay failed (skips are not failures)."""
    from mpicoll.simulate.replay import SimGridMissing, require

    from .harness import Progress, table_header, table_row
    from .results import Sink
    try:
        import_modules(args.imports)
    except PluginError as exc:
        raise SystemExit(str(exc)) from None
    try:
        require()
    except SimGridMissing as exc:
        raise SystemExit(str(exc)) from None
    try:
        jobs = plan_jobs(args)
    except (ValueError, OSError) as exc:
        raise SystemExit(str(exc)) from None
    if args.jobs < 1:
        raise SystemExit(f"-j/--jobs: expected >= 1; got {args.jobs}")
    prov = provenance(args, jobs)
    sink = Sink(0, args.output, args.csv)
    sink.write(prov)
    print(f"# mpicoll.bench simulate {prov['date']}: {len(jobs)} replays, -j {args.jobs}, "
          f"{prov['mpi_library']}")
    print(f"# platform {args.platform}, network model {args.network_model}, local costs: "
          f"{prov['calibration']['source']}")
    progress = Progress(True, len(jobs), args.progress, every=5.0)
    start = time.monotonic()
    ctx = multiprocessing.get_context("fork")
    failed, records, smallest = 0, [], min((x.nbytes for x in jobs), default=0)
    # Records are written as replays finish (a long sweep stopped early keeps what it did);
    # the table, sorted, comes at the end.
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_run_one, j): j for j in jobs}
        for fut in cf.as_completed(futures):
            j, out = futures[fut], fut.result()
            progress.step(f"{j.primitive} {j.algorithm} N={j.nranks} {j.nbytes} B")
            if "seconds" in out:
                rec = record_of(j, out)
                records.append(rec)
                sink.write(rec)
                continue
            # SMPI's own collectives crash in a few cases (SimGrid 3.32: exit 134 in some of
            # Open MPI's small-message choices): the native row is then missing, not wrong.
            kind = "skip" if "skip" in out or j.algorithm in NATIVE else "error"
            failed += kind == "error"
            reason = out.get("skip") or out.get("error")
            if "skip" not in out:
                reason = "SMPI failed: " + " | ".join(reason.strip().splitlines()[-2:])
            sink.write({"type": "skip", "primitive": j.primitive, "algorithm": j.algorithm,
                        "nranks": j.nranks, "bytes": j.nbytes, "simulated": True,
                        "reason": reason, "failed": kind == "error"})
            if kind == "error" or j.nbytes == smallest:
                print(f"# {kind}: {j.primitive} {j.algorithm} N={j.nranks} {j.nbytes} B: "
                      f"{reason}", flush=True)
    records.sort(key=lambda r: (r["primitive"], r["nranks"], r["bytes"], r["algorithm"]))
    last = None
    for rec in records:
        key = (rec["primitive"], rec["nranks"])
        if key != last:
            for line in table_header(f"{rec['primitive']} N={rec['nranks']} (simulated)"):
                print(line)
            last = key
        print(table_row(rec))
    elapsed = time.monotonic() - start
    sink.write({"type": "end", "elapsed_s": elapsed, "replays": len(jobs), "failed": failed,
                "loadavg_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None})
    sink.close()
    print(f"# {len(records)} rows simulated, {failed} failed, {elapsed:.1f} s wall")
    if args.tuning and records:
        write_tuning(args, prov, records)
        print(f"# simulated tuning table written to {args.tuning}")
    if args.plot and records:
        from .plot import plot_results
        plot_results([], records, args.plot)
        print(f"# plot written to {args.plot}")
    return 1 if failed else 0
