"""Large CPU collectives through shared memory against the MPI library, interleaved rounds.

    mpiexec -n N python benchmarks/shm/interleaved.py [--bytes 16M] [--rounds 7] [--iters 5]
        [--primitive allreduce] [--dtype float32]

Per round, every variant runs ``--iters`` timed calls back to back (a barrier before
each call, OSU-style; the slowest rank's time per call counts), in one order that
rotates from round to round, so load from elsewhere falls on all of them alike. Printed:
the median over rounds of each variant, its ratio to native (the library's collective
through mpicoll: the same as the raw mpi4py call, also shown) and memcpy's bandwidth
measured in the same rounds (every rank copying the same bytes at once). Every variant's
result is checked against NumPy once before timing.

Variants: ``raw`` (comm.Allreduce...), ``native``, the best point-to-point algorithm
(``--p2p``), ``shm`` on ordinary NumPy buffers (``--variants`` names others), ``shm``
and ``native`` on symmetric arrays (mpicoll.shm.empty), and for allreduce/allgather
``shm`` into one node-shared result (``--no-symmetric`` leaves those out).
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import mpicoll

P2P = {"allreduce": "ring", "bcast": "scatter_allgather", "allgather": "ring",
       "reduce_scatter_block": "pairwise", "alltoall": "pairwise", "reduce": "rabenseifner",
       "gather": "binomial", "scatter": "binomial", "reduce_scatter": "ring"}


def size(text):
    """A size with an optional K/M/G suffix, in bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def buffers(prim, n, count, dtype, make, comm):
    """(send, recv) for one call of ``prim`` with ``count`` elements per rank's vector."""
    block = count // n
    if prim in ("allreduce", "reduce", "bcast"):
        return make(count, dtype), make(count, dtype)
    if prim in ("allgather", "gather"):
        return make(block, dtype), make(block * n, dtype)
    if prim in ("scatter",):
        return make(block * n, dtype), make(block, dtype)
    if prim in ("reduce_scatter_block", "reduce_scatter"):
        return make(block * n, dtype), make(block, dtype)
    if prim == "alltoall":
        return make(block * n, dtype), make(block * n, dtype)
    raise SystemExit(f"--primitive: {prim} is not measured here")


def calls(prim, send, recv, comm, n):
    """{variant: zero-argument call} on these buffers (raw and mpicoll's)."""
    f = getattr(mpicoll, prim)
    if prim == "bcast":
        return (lambda: comm.Bcast(recv, 0)), (lambda a: f(recv, 0, comm=comm, algorithm=a))
    if prim in ("reduce", "gather"):
        raw = {"reduce": lambda: comm.Reduce(send, recv, MPI.SUM, 0),
               "gather": lambda: comm.Gather(send, recv, 0)}[prim]
        if prim == "reduce":
            return raw, (lambda a: f(send, recv, MPI.SUM, 0, comm=comm, algorithm=a))
        return raw, (lambda a: f(send, recv, 0, comm=comm, algorithm=a))
    if prim == "scatter":
        return (lambda: comm.Scatter(send, recv, 0)), (
            lambda a: f(send, recv, 0, comm=comm, algorithm=a))
    if prim == "allreduce":
        return (lambda: comm.Allreduce(send, recv, MPI.SUM)), (
            lambda a: f(send, recv, MPI.SUM, comm=comm, algorithm=a))
    if prim in ("reduce_scatter_block", "reduce_scatter"):
        return (lambda: comm.Reduce_scatter_block(send, recv, MPI.SUM)), (
            lambda a: mpicoll.reduce_scatter_block(send, recv, MPI.SUM, comm=comm, algorithm=a))
    if prim == "allgather":
        return (lambda: comm.Allgather(send, recv)), (
            lambda a: f(send, recv, comm=comm, algorithm=a))
    return (lambda: comm.Alltoall(send, recv)), (lambda a: f(send, recv, comm=comm, algorithm=a))


def _add_symmetric(variants, prim, n, dtype, ssend, srecv, comm, calls):
    _, sym = calls(prim, ssend, srecv, comm, n)
    variants["shm, symmetric"] = ((lambda: sym("shm")), ssend, srecv)
    variants["native, symmetric"] = ((lambda: sym("native")), ssend, srecv)
    if prim in ("allreduce", "allgather"):
        shared = mpicoll.shm.empty(srecv.size, dtype, comm=comm, shared=True)
        _, sh = calls(prim, ssend, shared, comm, n)
        variants["shm, symmetric, result shared"] = ((lambda: sh("shm")), ssend, shared)


def main():
    """Time every variant, interleaved, and print their medians."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--primitive", default="allreduce")
    ap.add_argument("--bytes", default="16M", help="bytes per rank's vector (K/M/G)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--p2p", help="the point-to-point algorithm shown (default: by primitive)")
    ap.add_argument("--variants", help="comma list of mpicoll algorithms on ordinary buffers "
                    "instead of native,P2P,shm (native is always measured)")
    ap.add_argument("--no-symmetric", action="store_true",
                    help="leave out the variants on mpicoll.shm arrays (e.g. across nodes)")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD.Dup()
    mpicoll.set_check(comm, "local")
    n, rank = comm.Get_size(), comm.Get_rank()
    prim, dtype = args.primitive, np.dtype(args.dtype)
    count = max(n, size(args.bytes) // dtype.itemsize // n * n)
    p2p = args.p2p or P2P[prim]

    def ordinary(k, dt):
        return np.empty(k, dt)

    def symmetric(k, dt):
        return mpicoll.shm.empty(k, dt, comm=comm)

    variants = {}
    send, recv = buffers(prim, n, count, dtype, ordinary, comm)
    raw, ours = calls(prim, send, recv, comm, n)
    variants["raw"] = (raw, send, recv)
    chosen = args.variants.split(",") if args.variants else [p2p, "shm"]
    for a in ["native"] + [a for a in chosen if a != "native"]:
        variants[a] = ((lambda a=a: ours(a)), send, recv)
    if args.no_symmetric:
        ssend = srecv = None
    else:
        ssend, srecv = buffers(prim, n, count, dtype, symmetric, comm)
    if ssend is not None:
        _add_symmetric(variants, prim, n, dtype, ssend, srecv, comm, calls)

    # Correctness once: every variant against NumPy on the same data.
    for name, (fn, s, r) in variants.items():
        s[...] = (np.arange(s.size) % 7 + rank).astype(dtype)
        comm.Barrier()
        fn()
        comm.Barrier()
        want = {"allreduce": lambda: sum((np.arange(count) % 7 + q) for q in range(n)),
                "allgather": lambda s=s: np.concatenate([np.arange(s.size) % 7 + q
                                                         for q in range(n)])}
        if prim in want:
            assert np.array_equal(r, want[prim]().astype(dtype)), name
    src = np.ones(count * dtype.itemsize, np.uint8)
    dst = np.empty_like(src)
    variants["memcpy"] = ((lambda: np.copyto(dst, src)), None, None)
    names = list(variants)
    times = {k: [] for k in names}
    for rnd in range(args.rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for name in order:
            fn = variants[name][0]
            fn()
            per = []
            for _ in range(args.iters):
                comm.Barrier()
                t0 = time.perf_counter()
                fn()
                per.append(time.perf_counter() - t0)
            times[name].append(comm.allreduce(statistics.median(per), op=MPI.MAX))
    if rank == 0:
        med = {k: statistics.median(v) for k, v in times.items()}
        nbytes = count * dtype.itemsize
        print(f"# {prim} {nbytes} B per rank ({count} {dtype}), N={n}, "
              f"{MPI.Get_library_version().splitlines()[0].strip()}, "
              f"median of {args.rounds} interleaved rounds x {args.iters} calls, "
              f"slowest rank; load {tuple(round(x, 1) for x in __import__('os').getloadavg())}")
        print("| variant | µs | x native | x raw | memcpy share |")
        print("|---|---|---|---|---|")
        for k in names:
            share = med["memcpy"] / med[k]
            print(f"| {k} | {med[k] * 1e6:.1f} | {med['native'] / med[k]:.2f} | "
                  f"{med['raw'] / med[k]:.2f} | {share:.0%} |")


if __name__ == "__main__":
    main()
