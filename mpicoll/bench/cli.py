r"""Command line of ``python -m mpicoll.bench`` (nccl-tests' option names).

Measure (under mpirun/srun)::

    python -m mpicoll.bench allreduce -b 16 -e 1M -f 4 -n 20 -w 5 -c 1 --algorithm all \
        -J out.jsonl --csv out.csv
    python -m mpicoll.bench all -b 8 -e 64K ...          # every primitive in one run
    python -m mpicoll.bench -p allreduce -b 8 ...        # the primitive as a flag

On GPUs (CuPy buffers, one GPU per local rank; NCCL's collectives as the
``nccl`` column where ``cupy.cuda.nccl`` works)::

    python -m mpicoll.bench allreduce -b 8 -e 64M --xp cupy --algorithm ring,native,nccl

Read results (serial): ``report RESULTS... [-o report.md]``,
``plot RESULTS... -o FILE.png``, ``predict --ranks 2..10000 --bytes 8,1M``.
Model and tuning (under MPI): ``fit [-o model.json]``, ``tune -o table.json``.
Small-call cost per face vs the raw mpi4py call: ``latency [--bytes 8]``; overlap of
nonblocking allreduce with computation (OSU): ``overlap [--bytes 16M]``.
Simulated at cluster scale (SimGrid/SMPI, serial): ``simulate --ranks 1024 --platform ...``.
Exit status: 1 when any #wrong > 0, 2 for bad arguments.
"""
import argparse
import sys

from mpicoll.core.registry import PRIMITIVES

from . import latency, model, overlap, plot, report, simulate, tune
from .run import run
from .specs import add_xp_arguments
from .units import OP_NAMES, parse_dtype, parse_range, parse_size

__all__ = ["main", "build_parser"]

#: ``--help``'s text, plain (the module docstring is reST, for the documentation)
DESCRIPTION = ("Measure mpicoll's collectives beside the MPI library's own and the plain "
               "mpi4py call, size by size\n(nccl-tests' option names), and read the results.")
EPILOG = """examples:
  mpiexec -n 4 python -m mpicoll.bench allreduce -b 16 -e 64M -f 4 --algorithm all -J out.jsonl
  python -m mpicoll.bench report out.jsonl            # winner per size, speedups
  python -m mpicoll.bench plot out.jsonl -o out.png   # time, busbw, speedup against size

Run python -m mpicoll.bench COMMAND --help for a command's options.
Exit status: 1 when any result was wrong (#wrong > 0), 2 for bad arguments."""

COMMANDS = PRIMITIVES + ("all", "report", "plot", "fit", "predict", "tune", "latency", "overlap",
                         "simulate")


def _size(text):
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dtype(text):
    try:
        return parse_dtype(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _size_list(text):
    try:
        sizes = parse_range(text, sizes=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not isinstance(sizes, list) or not sizes:
        raise argparse.ArgumentTypeError(f"expected a comma list of sizes; got {text!r}")
    return sorted(set(sizes))


def _csv_list(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def sweep_options(p, *, b="8", e="1M", f=2.0, n=20, w=5, op=True):
    """-b/-e/-f/-n/-w/-d/-o/-r/-c and friends, shared by run, fit and tune."""
    g = p.add_argument_group("sweep (nccl-tests' names)")
    g.add_argument("-b", "--minbytes", type=_size, default=parse_size(b),
                   help=f"smallest size, K/M/G suffixes (default {b})")
    g.add_argument("-e", "--maxbytes", type=_size, default=parse_size(e),
                   help=f"largest size (default {e})")
    g.add_argument("-f", "--stepfactor", type=float, default=f,
                   help=f"multiply the size by this between steps (default {f:g})")
    g.add_argument("--sizes", type=_size_list, default=None, metavar="LIST",
                   help="these sizes instead of -b/-e/-f: a comma list, K/M/G suffixes "
                        "(e.g. 8,64K,16M,256M)")
    g.add_argument("-n", "--iters", type=int, default=n,
                   help=f"timed calls per size; fewer above --large-bytes (default {n})")
    g.add_argument("-w", "--warmup", type=int, default=w,
                   help=f"untimed warm-up calls per size (default {w})")
    g.add_argument("-c", "--check", type=int, default=1, choices=(0, 1),
                   help="1: untimed correctness pass per size and algorithm, #wrong "
                        "(default 1); 0: #wrong is N/A")
    if op:
        g.add_argument("-o", "--op", dest="opname", default="sum", choices=OP_NAMES,
                       help="reduction op (default sum)")
    g.add_argument("-d", "--dtype", type=_dtype, default=parse_dtype("float"),
                   help="data type: float, double, half, int8, uint8, int32, ... (default float)")
    g.add_argument("-r", "--root", type=int, default=0,
                   help="root of rooted primitives (default 0)")
    g.add_argument("--large-bytes", type=_size, default=parse_size("1M"),
                   help="above this size, iterations shrink in proportion (default 1M)")
    g.add_argument("--timing", choices=("osu", "loop"), default="osu",
                   help="osu: time each call, barrier between calls (default); "
                        "loop: time back-to-back calls")
    add_xp_arguments(g, "cupy: device buffers, one GPU per local rank, messages CUDA-aware "
                        "or staged through pinned host memory (the path is recorded in the "
                        "provenance)")
    g.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module or .py file first (e.g. one registering a test "
                        "algorithm); repeatable")


def build_parser():
    """The argument parser of ``python -m mpicoll.bench`` and its commands."""
    top = argparse.ArgumentParser(
        prog="python -m mpicoll.bench", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    sub = top.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in PRIMITIVES + ("all",):
        p = sub.add_parser(name, help=f"measure {name}" if name != "all" else
                           "measure every primitive in one run")
        sweep_options(p)
        g = p.add_argument_group("algorithms and output")
        g.add_argument("--algorithm", "-a", dest="algorithms", type=_csv_list, default=["all"],
                       help="comma list of algorithm names, or all (native and raw included; "
                            "default all); raw: the plain mpi4py call (comm.Allreduce(sendbuf, "
                            "recvbuf, op), ...) on the bench's communicator, no mpicoll layer, "
                            "same buffers, timing and check (skipped with --xp cupy unless MPI's "
                            "collectives are CUDA-aware); nccl: NCCL's own collective on the "
                            "same buffers (--xp cupy only, where it is included in all; "
                            "otherwise, or "
                            "when NCCL cannot run, skipped with the reason); gloo: "
                            "torch.distributed's gloo backend on tensors sharing the same "
                            "buffers; torch-mpicoll[:ALGORITHM]: the same call through "
                            "torch.distributed on the \"mpicoll\" backend (auto, or ALGORITHM), "
                            "the torch layer's cost beside the plain mpicoll row (both only "
                            "when listed; skipped with the reason where torch cannot run)")
        g.add_argument("--native-algorithm", type=_csv_list, default=[], metavar="NAME[,...]",
                       help="also run the MPI library's own NAME algorithm, forced (MPICH "
                            "MPIR_CVAR_<COLL>_INTRA_ALGORITHM, Open MPI coll_tuned_<coll>_"
                            "algorithm), as row native[NAME]; PRIMITIVE=NAME for one primitive")
        g.add_argument("-J", "--output", metavar="FILE", help="results as JSON lines")
        g.add_argument("--csv", metavar="FILE", help="results as CSV")
        g.add_argument("--trace", metavar="FILE.json",
                       help="Chrome-trace timeline of one call of each hand-written algorithm "
                            "at --trace-bytes (default: the largest size)")
        g.add_argument("--trace-bytes", type=_size, default=None)
        g.add_argument("--no-memcpy", dest="memcpy", action="store_false",
                       help="skip the NumPy copy-bandwidth reference")
        g.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                       help="progress lines on stderr (auto: every 5 s of a long sweep)")
    report.add_parser(sub)
    plot.add_parser(sub)
    model.add_parsers(sub, sweep_options)
    tune.add_parser(sub, sweep_options)
    latency.add_parser(sub)
    overlap.add_parser(sub)
    simulate.add_parser(sub)
    return top


def _hoist_primitive_flag(argv):
    """``-p allreduce ...`` / ``--primitive=allreduce ...`` -> ``allreduce ...``."""
    if argv and argv[0] in COMMANDS or any(a in ("-h", "--help") for a in argv[:1]):
        return argv
    for i, a in enumerate(argv):
        if a in ("-p", "--primitive") and i + 1 < len(argv):
            return [argv[i + 1]] + argv[:i] + argv[i + 2:]
        if a.startswith("--primitive="):
            return [a.split("=", 1)[1]] + argv[:i] + argv[i + 1:]
    return argv


def main(argv=None):
    """Run ``python -m mpicoll.bench`` on ``argv`` (default: the command line); the exit status."""
    argv = _hoist_primitive_flag(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(argv)
    if args.command in PRIMITIVES + ("all",):
        return run(args)
    return args.func(args)
