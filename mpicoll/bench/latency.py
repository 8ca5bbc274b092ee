"""``python -m mpicoll.bench latency``: one small call's cost, face by face, against the raw call.

For each size and hand-written algorithm: the median time per call of
the plain mpi4py call on the same buffers (``raw``: what a user would
otherwise write), and of mpicoll in each of its faces — the blocking call
in the default ``agree`` check mode, the same through the drop-in
(``P2PComm(comm, <primitive>=<algorithm>).Allreduce(x, y)``: what mpi4py
code switched to mpicoll pays), in ``local`` mode, a persistent request
(``Start(); Wait()``) and a nonblocking call (``i...(...).Wait()``), which
is set beside mpi4py's own nonblocking call (``raw_nb``:
``comm.Iallreduce(x, y).Wait()``, staged like ``raw``).
``--torch`` (allreduce on host buffers): three more faces, all in place, in
``agree`` mode, on the communicator of a ``"mpicoll"`` torch process group
running the same algorithm: ``inplace`` (``mpicoll.allreduce(MPI.IN_PLACE,
y)``: the call the backend makes), ``torch_pg`` (the process group's own
``allreduce([t], opts)`` and ``wait()``: the backend's part) and ``torch``
(``dist.all_reduce(t, group=pg)``: what torch code pays). ``torch - torch_pg``
is torch's Python wrapper, ``torch_pg - inplace`` the backend's.
Each figure is the median of ``--repeats`` blocks of ``-n`` calls (each
block timed between barriers, the slowest rank's time per call), so a noisy
machine shows as spread between blocks rather than as a bias. Results are
checked once against the raw call before timing.

``--xp cupy``: the buffers are CuPy arrays on each rank's GPU (as the main
bench selects it), every call is followed by a stream synchronisation, and
``raw`` is what a user would write: the mpi4py call on the device arrays
where MPI's collectives are CUDA-aware (as the main bench's ``raw`` column
decides: :func:`mpicoll.bench.raw.skip_reason`), else the copy to the host,
the mpi4py call on host arrays and the copy back. The header names the
device path (staged, cuda-aware) and the transport (``MPICOLL_GPU_TRANSPORT``).
"""
import json
import statistics
import time

import numpy as np

import mpicoll

from . import raw as rawcol
from .specs import ArrayModule, add_xp_arguments

__all__ = ["add_parser", "latency", "table", "FACES"]

FACES = ("raw", "agree", "p2pcomm", "local", "persistent", "raw_nb", "nonblocking")
TORCH_FACES = ("inplace", "torch_pg", "torch")

# primitive -> (raw call, functional call, nonblocking, persistent, raw nonblocking call)
# on (comm, x, y); _RESULT names the buffer a raw call writes (staged by hand on device arrays)
_CALLS = {
    "allreduce": (lambda c, x, y: c.Allreduce(x, y),
                  lambda x, y, a, comm: mpicoll.allreduce(x, y, algorithm=a, comm=comm),
                  lambda x, y, a, comm: mpicoll.iallreduce(x, y, algorithm=a, comm=comm),
                  lambda x, y, a, comm: mpicoll.allreduce_init(x, y, algorithm=a, comm=comm),
                  lambda c, x, y: c.Iallreduce(x, y).Wait()),
    "bcast": (lambda c, x, y: c.Bcast(x, 0),
              lambda x, y, a, comm: mpicoll.bcast(x, 0, algorithm=a, comm=comm),
              lambda x, y, a, comm: mpicoll.ibcast(x, 0, algorithm=a, comm=comm),
              lambda x, y, a, comm: mpicoll.bcast_init(x, 0, algorithm=a, comm=comm),
              lambda c, x, y: c.Ibcast(x, 0).Wait()),
    # counts in a new list at every call, as user code builds them (the memo compares them
    # by value); each rank's block has x.size elements
    "allgatherv": (lambda c, x, y: c.Allgatherv(x, [y, _counts(c, x)]),
                   lambda x, y, a, comm: mpicoll.allgatherv(x, [y, _counts(comm, x)],
                                                            algorithm=a, comm=comm),
                   lambda x, y, a, comm: mpicoll.iallgatherv(x, [y, _counts(comm, x)],
                                                             algorithm=a, comm=comm),
                   lambda x, y, a, comm: mpicoll.allgatherv_init(x, [y, _counts(comm, x)],
                                                                 algorithm=a, comm=comm),
                   lambda c, x, y: c.Iallgatherv(x, [y, _counts(c, x)]).Wait()),
    "barrier": (lambda c, x, y: c.Barrier(),
                lambda x, y, a, comm: mpicoll.barrier(algorithm=a, comm=comm),
                lambda x, y, a, comm: mpicoll.ibarrier(algorithm=a, comm=comm),
                lambda x, y, a, comm: mpicoll.barrier_init(algorithm=a, comm=comm),
                lambda c, x, y: c.Ibarrier().Wait()),
}
_RESULT = {"allreduce": 1, "bcast": 0, "allgatherv": 1, "barrier": None}
_BLOCKS = frozenset({"allgatherv"})   # the receive buffer holds N blocks (others: one)


def _counts(comm, x):
    return [x.size] * comm.Get_size()


def add_parser(sub):
    """Add the ``latency`` command to ``sub`` (the bench's subcommands)."""
    p = sub.add_parser("latency", help="cost of one small call per face (agree, local, "
                                       "persistent, nonblocking) against the raw mpi4py call "
                                       "(blocking, and nonblocking beside the nonblocking face)")
    p.add_argument("--primitive", default="allreduce", choices=sorted(_CALLS))
    p.add_argument("--bytes", default="8", help="comma list of sizes in bytes (default 8)")
    p.add_argument("--algorithm", default="all",
                   help="comma list of hand-written algorithms, or all (default)")
    p.add_argument("-n", "--iters", type=int, default=2000, help="calls per timed block")
    p.add_argument("--repeats", type=int, default=7, help="timed blocks (median taken)")
    p.add_argument("-J", "--output", metavar="FILE", help="results as JSON lines")
    p.add_argument("--torch", action="store_true",
                   help="allreduce, host buffers: also time the call through torch.distributed "
                        "on the \"mpicoll\" backend (faces inplace, torch_pg, torch)")
    add_xp_arguments(p, "cupy: device buffers on each rank's GPU, raw = the mpi4py call on "
                        "them where MPI's collectives are CUDA-aware, else staged by hand "
                        "through host copies")
    p.set_defaults(func=latency)


def _time(comm, fn, iters, repeats, sync):
    per_block = []
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
            sync()
        dt = (time.perf_counter() - t0) / iters
        per_block.append(comm.allreduce(dt, op=_max()))
    return statistics.median(per_block)


def _max():
    from mpi4py import MPI
    return MPI.MAX


def _raw(primitive, raw, comm, x, y, am):
    """A raw face (``raw``: the mpi4py call on ``comm``, x, y).

    The call on the buffers where the main bench's ``raw`` column would make it
    (:func:`mpicoll.bench.raw.skip_reason`: host arrays, or MPI collectives that are
    CUDA-aware), else staged by hand through host copies.
    """
    which = _RESULT[primitive]
    if rawcol.skip_reason(am) is None:
        return lambda: raw(comm, x, y)
    if which is None:                      # barrier: no data to stage
        return lambda: raw(comm, None, None)
    hy = None if y is None else am.to_host(y)

    def staged():
        hx = am.to_host(x)
        raw(comm, hx, hy)
        am.put((x, y)[which], 0, (hx, hy)[which])
    return staged


def _faces(primitive, comm, x, y, algo, am):
    raw, blocking, start, init, raw_nb = _CALLS[primitive]
    persistent = init(x, y, algo, comm)

    def run_persistent():
        persistent.Start()
        persistent.Wait()
    dropin = mpicoll.P2PComm(comm, **{primitive: algo})
    return {
        "raw": _raw(primitive, raw, comm, x, y, am),
        "agree": lambda: blocking(x, y, algo, comm),
        "p2pcomm": lambda: raw(dropin, x, y),
        "local": lambda: blocking(x, y, algo, comm),
        "persistent": run_persistent,
        "raw_nb": _raw(primitive, raw_nb, comm, x, y, am),
        "nonblocking": lambda: start(x, y, algo, comm).Wait(),
    }, persistent


def latency(args):
    """The ``latency`` command: time every face of small calls and print the table; 0."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD.Dup()
    prim = args.primitive
    algos = [a for a in mpicoll.algorithms(prim) if a != "native"] \
        if args.algorithm == "all" else args.algorithm.split(",")
    am = ArrayModule(args.xp, comm, args.device, args.shared_result)
    where = "host" if args.xp == "numpy" else "host, symmetric arrays (mpicoll.shm.empty)"
    if args.xp == "cupy":
        dp = am.provenance()["device_path"]
        where = (f"cupy, {am.path}, transport {dp['transport']}, "
                 f"MPS {'on' if am.mps.get('mps') else 'off'}")
    if args.torch and (prim != "allreduce" or args.xp == "cupy"):
        raise SystemExit("--torch: allreduce on host buffers (--xp numpy or shm) only")
    table(comm, prim, algos, [int(s) for s in args.bytes.split(",")], args.iters, args.repeats,
          am, where, args.output, torch_faces=args.torch)
    return 0


def _torch_faces(comm, y, algo):
    """The in-place faces through torch (``--torch``).

    The direct in-place call, the process group's method and ``dist.all_reduce``, on one
    "mpicoll" group running ``algo``.
    """
    import torch
    import torch.distributed as dist
    from mpi4py import MPI

    import mpicoll.torch as mt
    if not dist.is_initialized():
        dist.init_process_group("mpicoll", init_method="mpi://")
    pg = dist.new_group(pg_options=mt.Options(algorithms={"allreduce": algo}, check="agree"))
    t = torch.from_numpy(y)
    opts = dist.AllreduceOptions()
    opts.asyncOp = False
    return {
        "inplace": lambda: mpicoll.allreduce(MPI.IN_PLACE, y, algorithm=algo, comm=pg.comm),
        "torch_pg": lambda: pg.allreduce([t], opts).wait(),
        "torch": lambda: dist.all_reduce(t, group=pg),
    }, pg


def table(comm, prim, algos, sizes, iters, repeats, am, where, output=None, torch_faces=False):
    """Time every face for each size and algorithm on ``am``'s buffers; print the table.

    The table is also appended to ``output`` as JSON lines. ``am``: a
    :class:`specs.ArrayModule` or anything with its ``name``, ``path``, ``collectives``,
    ``empty``, ``to_host``, ``put`` and ``sync``. ``torch_faces``: also the
    :data:`TORCH_FACES` (allreduce, host).
    """
    from mpi4py import MPI
    rank, size = comm.Get_rank(), comm.Get_size()
    out = open(output, "a") if output and rank == 0 else None
    if rank == 0:
        print(f"# mpicoll.bench latency: {prim}, N={size}, {where}, "
              f"{MPI.Get_library_version().splitlines()[0]}")
        print(f"# median of {repeats} blocks x {iters} calls, slowest rank per block; "
              f"µs per call")
        faces = FACES + (TORCH_FACES if torch_faces else ())
        print(f"# {'bytes':>8} {'algorithm':<20} " + " ".join(f"{f:>11}" for f in faces)
              + "  (x raw: agree p2pcomm local persistent; x raw_nb: nonblocking"
              + ("; torch - inplace" if torch_faces else "") + ")")
    for nbytes in sizes:
        n = max(1, nbytes // 8)
        for algo in algos:
            x = am.empty(n, np.float64)
            y = am.empty(n * size if prim in _BLOCKS else n, np.float64)
            am.put(x, 0, np.full(n, rank + 1.0))
            am.sync()                      # the copy is asynchronous on CuPy
            faces, persistent = _faces(prim, comm, x, y, algo, am)
            times = {}
            for face in FACES:
                mpicoll.set_check(comm, "local" if face == "local" else "agree")
                times[face] = _time(comm, faces[face], iters, repeats, am.sync) * 1e6
            mpicoll.set_check(comm, None)
            persistent.Free()
            if torch_faces:
                import torch.distributed as dist
                extra, pg = _torch_faces(comm, y, algo)
                for face in TORCH_FACES:
                    am.put(y, 0, np.zeros(n))         # in place: zeros stay zeros, no overflow
                    times[face] = _time(comm, extra[face], iters, repeats, am.sync) * 1e6
                am.put(y, 0, np.full(n, rank + 1.0))
                extra["torch"]()                  # checked below like the other faces
                dist.destroy_process_group(pg)
            if prim == "allreduce":     # the check: the last call's result
                assert np.all(am.to_host(y) == size * (size + 1) / 2), \
                    f"{algo}: wrong allreduce result"
            elif prim == "allgatherv":
                assert np.all(am.to_host(y) == np.repeat(np.arange(1.0, size + 1), n)), \
                    f"{algo}: wrong allgatherv result"
            if rank == 0:
                ratios = " ".join(f"{times[f] / times['raw']:.2f}" for f in FACES[1:5])
                ratios += f"; {times['nonblocking'] / times['raw_nb']:.2f}"
                if torch_faces:
                    ratios += f"; +{times['torch'] - times['inplace']:.2f} us"
                print(f"  {nbytes:>8} {algo:<20} "
                      + " ".join(f"{times[f]:>11.2f}" for f in FACES + tuple(
                          f for f in TORCH_FACES if f in times)) + f"  ({ratios})")
                if out:
                    out.write(json.dumps({"primitive": prim, "ranks": size, "bytes": nbytes,
                                          "algorithm": algo, "us_per_call": times,
                                          "buffers": where, "iters": iters,
                                          "repeats": repeats}) + "\n")
    if out:
        out.close()
