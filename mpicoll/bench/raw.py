"""The ``raw`` column: the plain mpi4py call a user would otherwise make, as a reference.

``native`` goes through ``mpicoll.<primitive>(..., algorithm="native")`` and
so pays mpicoll's layer (argument validation, the private communicator, the
context). The ``raw`` rows call mpi4py's collective straight on the bench's
communicator (a ``MPI.COMM_WORLD.Dup()``), with nothing of mpicoll in
between, on the same buffers, timed with the same loop and checked by the
same untimed pass (``#wrong``). Each primitive's spec declares its call
(:attr:`mpicoll.calls.spec.Spec.raw`, :meth:`~mpicoll.calls.spec.Spec.raw_call`)::

    bcast           comm.Bcast(buf, root)
    reduce          comm.Reduce(sendbuf, recvbuf, op, root)   # recvbuf None off the root
    allreduce       comm.Allreduce(sendbuf, recvbuf, op)
    gather          comm.Gather(sendbuf, recvbuf, root)
    allgather       comm.Allgather(sendbuf, recvbuf)
    scatter         comm.Scatter(sendbuf, recvbuf, root)
    reduce_scatter  comm.Reduce_scatter_block(sendbuf, recvbuf, op)
    alltoall        comm.Alltoall(sendbuf, recvbuf)
    barrier         comm.Barrier()
    gatherv         comm.Gatherv(sendbuf, [recvbuf, counts], root)
    scatterv        comm.Scatterv([sendbuf, counts], recvbuf, root)
    allgatherv      comm.Allgatherv(sendbuf, [recvbuf, counts])
    alltoallv       comm.Alltoallv([sendbuf, counts], [recvbuf, counts])
    scan            comm.Scan(sendbuf, recvbuf, op)
    exscan          comm.Exscan(sendbuf, recvbuf, op)

``raw`` is not a registered algorithm (``mpicoll.allreduce(...,
algorithm="raw")`` does not exist): the sweep adds its rows itself, as for
``nccl``; ``tune`` never measures nor picks it. ``--algorithm all`` includes
it (first, so every other row of a size records ``vs_raw`` = raw time /
its time); ``--algorithm raw,...`` selects it explicitly.

With ``--xp cupy`` the buffers are handed to mpi4py as they are (after the
current stream is synchronised, as mpi4py requires), which is valid only
where the MPI library's *collectives* are CUDA-aware
(``gpu.device_path()["collectives"]``); otherwise (staged, or CUDA-aware in
point-to-point only) the column is skipped, with the reason.
"""
from .specs import Declared

__all__ = ["LABEL", "CALLS", "wanted", "skip_reason", "agreed_skip_reason", "call"]

LABEL = "raw"

#: primitive -> the mpi4py call the raw row makes (recorded as ``mpi_call``): its spec's ``raw``.
CALLS = Declared("raw")


def wanted(args):
    """True when the run asks for the raw column.

    ``raw`` listed, or ``all`` in a measuring command
    (``python -m mpicoll.bench PRIMITIVE|all``; never fit or tune).
    """
    algs = getattr(args, "algorithms", ["all"])
    if LABEL in algs:
        return True
    command = getattr(args, "command", None)
    return algs == ["all"] and (command == "all" or command in CALLS)


def skip_reason(am):
    """Why this rank cannot make the raw calls on ``am``'s buffers (None: it can)."""
    if am.name in ("numpy", "shm"):         # host buffers
        return None
    if getattr(am, "collectives", None) != "cuda-aware":
        # MPICH + CUDA UCX is CUDA-aware in point-to-point only: its collectives reduce
        # on the CPU and would dereference device pointers.
        return (f"raw: --xp {am.name} on the {am.path} device path: the MPI library's "
                f"collectives are not CUDA-aware, so mpi4py cannot hand them device buffers; "
                f"raw column skipped")
    return None


def agreed_skip_reason(comm, am):
    """The first rank's reason to skip the column, the same on every rank. Collective."""
    return next((r for r in comm.allgather(skip_reason(am)) if r), None)


def call(case, comm, am=None):
    """A zero-argument callable: the plain mpi4py collective on ``case``'s buffers."""
    spec = case.spec
    if spec.raw is None:
        raise ValueError(f"raw: no mpi4py call for {spec.name!r}")
    run = spec.raw_call(case, comm)
    if am is None or am.name in ("numpy", "shm"):
        return run
    sync = am.sync

    def synced():
        sync()          # mpi4py and MPI do not wait for work queued on the stream
        run()
    return synced
