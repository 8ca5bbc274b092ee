"""``python -m mpicoll.bench overlap``: OSU's overlap figure for nonblocking allreduce.

As ``osu_iallreduce`` measures it, per algorithm and size (medians over
``--repeats`` runs, slowest rank):

- *pure communication*: ``iallreduce(...)`` then ``Wait()`` at once;
- *compute*: a NumPy loop (``np.multiply`` on a 2 MiB vector; NumPy releases
  the GIL) calibrated to last as long as the pure communication;
- *overall*: start the collective, compute, then ``Wait()``;
- *overlap* = ``100 * max(0, 1 - (overall - compute) / pure)``, at most 100.

Progress comes from where it is configured: inside ``Wait`` only
(``MPICOLL_PROGRESS`` unset), or from the progress thread
(``MPICOLL_PROGRESS=thread``). The ``raw`` row is mpi4py's own
``comm.Iallreduce`` (MPI's nonblocking collective) for comparison.
"""
import json
import os
import statistics
import time

import numpy as np

import mpicoll

__all__ = ["add_parser", "overlap"]


def add_parser(sub):
    """Add the ``overlap`` command to ``sub`` (the bench's subcommands)."""
    p = sub.add_parser("overlap", help="OSU overlap of nonblocking allreduce with computation")
    p.add_argument("--bytes", default="16M",
                   help="comma list of sizes, K/M suffixes (default 16M)")
    p.add_argument("--algorithm", default="ring,rabenseifner,raw",
                   help="comma list of allreduce algorithms; raw = comm.Iallreduce")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("-J", "--output", metavar="FILE", help="results as JSON lines")
    p.set_defaults(func=overlap)


def _parse(text):
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * mult


_A = np.ones(1 << 18)
_B = np.empty_like(_A)


def _compute(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        np.multiply(_A, 1.0000001, out=_B)


def _median(comm, fn, repeats):
    from mpi4py import MPI
    ts = []
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        ts.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return statistics.median(ts)


def overlap(args):
    """The ``overlap`` command: OSU's overlap of nonblocking allreduce with computation; 0."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD.Dup()
    rank, size = comm.Get_rank(), comm.Get_size()
    progress = os.environ.get("MPICOLL_PROGRESS") or "none (inside Wait)"
    out = open(args.output, "a") if args.output and rank == 0 else None
    if rank == 0:
        print(f"# mpicoll.bench overlap: allreduce, N={size}, progress: {progress}, "
              f"{MPI.Get_library_version().splitlines()[0]}")
        print(f"# medians of {args.repeats} runs (slowest rank), ms")
        print(f"# {'bytes':>10} {'algorithm':<14} {'overall':>9} {'compute':>9} {'pure':>9} "
              f"{'overlap%':>9}")
    for nbytes in [_parse(s) for s in args.bytes.split(",")]:
        x = np.full(max(1, nbytes // 8), rank + 1.0)
        y = np.empty_like(x)
        for algo in args.algorithm.split(","):
            if algo == "raw":
                def start(x=x, y=y):
                    return comm.Iallreduce(x, y)
            else:
                def start(a=algo, x=x, y=y):
                    return mpicoll.iallreduce(x, y, algorithm=a, comm=comm)
            start().Wait()
            pure = _median(comm, lambda: start().Wait(), args.repeats)
            comp = _median(comm, lambda pure=pure: _compute(pure), args.repeats)

            def both(pure=pure):
                req = start()
                _compute(pure)
                req.Wait()
            overall = _median(comm, both, args.repeats)
            assert np.all(y == size * (size + 1) / 2), f"{algo}: wrong result"
            # OSU's formula exceeds 100 when noise makes overall < compute: clamp.
            ov = 100.0 * min(1.0, max(0.0, 1.0 - (overall - comp) / pure))
            if rank == 0:
                print(f"  {nbytes:>10} {algo:<14} {overall * 1e3:>9.2f} {comp * 1e3:>9.2f} "
                      f"{pure * 1e3:>9.2f} {ov:>9.0f}")
                if out:
                    out.write(json.dumps({"bytes": nbytes, "algorithm": algo, "ranks": size,
                                          "progress": progress, "overall_s": overall,
                                          "compute_s": comp, "pure_s": pure,
                                          "overlap_pct": ov}) + "\n")
    if out:
        out.close()
    return 0
