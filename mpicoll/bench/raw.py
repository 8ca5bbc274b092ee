"""The ``raw`` column: the plain mpi4py call a user would otherwise make, as a reference.

``native`` goes through ``mpicoll.<primitive>(..., algorithm="native")`` and
so pays mpicoll's layer (argument validation, the private communicator, the
context). The ``raw`` rows call mpi4py's collective straight on the bench's
communicator (a ``MPI.COMM_WORLD.Dup()``), with nothing of mpicoll in
between, on the same buffers, timed with the same loop and checked by the
same untimed pass (``#wrong``)::

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
__all__ = ["LABEL", "CALLS", "wanted", "skip_reason", "agreed_skip_reason", "call"]

LABEL = "raw"

#: primitive -> the mpi4py call the raw row makes (recorded as ``mpi_call``).
CALLS = {"bcast": "comm.Bcast(buf, root)",
         "reduce": "comm.Reduce(sendbuf, recvbuf, op, root)",
         "allreduce": "comm.Allreduce(sendbuf, recvbuf, op)",
         "gather": "comm.Gather(sendbuf, recvbuf, root)",
         "allgather": "comm.Allgather(sendbuf, recvbuf)",
         "scatter": "comm.Scatter(sendbuf, recvbuf, root)",
         "reduce_scatter": "comm.Reduce_scatter_block(sendbuf, recvbuf, op)",
         "alltoall": "comm.Alltoall(sendbuf, recvbuf)",
         "barrier": "comm.Barrier()",
         "gatherv": "comm.Gatherv(sendbuf, [recvbuf, counts], root)",
         "scatterv": "comm.Scatterv([sendbuf, counts], recvbuf, root)",
         "allgatherv": "comm.Allgatherv(sendbuf, [recvbuf, counts])",
         "alltoallv": "comm.Alltoallv([sendbuf, counts], [recvbuf, counts])",
         "scan": "comm.Scan(sendbuf, recvbuf, op)",
         "exscan": "comm.Exscan(sendbuf, recvbuf, op)"}

#: The commands whose ``--algorithm all`` includes the raw column (not fit, not tune).
_MEASURING = tuple(CALLS) + ("all",)


def wanted(args):
    """True when the run asks for the raw column.

    ``raw`` listed, or ``all`` in a measuring command
    (``python -m mpicoll.bench PRIMITIVE|all``; never fit or tune).
    """
    algs = getattr(args, "algorithms", ["all"])
    if LABEL in algs:
        return True
    return algs == ["all"] and getattr(args, "command", None) in _MEASURING


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


def _vcall(c, comm):
    prim, root = c.spec.name, c.root
    if prim == "gatherv":
        recv = [c.recv, c.vcounts] if c.rank == root else None
        return lambda: comm.Gatherv(c.send, recv, root)
    if prim == "scatterv":
        send = [c.send, c.vcounts] if c.rank == root else None
        return lambda: comm.Scatterv(send, c.recv, root)
    if prim == "allgatherv":
        recv = [c.recv, c.vcounts]
        return lambda: comm.Allgatherv(c.send, recv)
    send, recv = [c.send, c.vcounts], [c.recv, c.vcounts]
    return lambda: comm.Alltoallv(send, recv)


def call(case, comm, am=None):
    """A zero-argument callable: the plain mpi4py collective on ``case``'s buffers."""
    c, prim = case, case.spec.name
    if prim == "bcast":
        def run():
            comm.Bcast(c.recv, c.root)
    elif prim == "reduce":
        def run():
            comm.Reduce(c.send, c.recv, c.op, c.root)
    elif prim == "allreduce":
        def run():
            comm.Allreduce(c.send, c.recv, c.op)
    elif prim == "gather":
        def run():
            comm.Gather(c.send, c.recv, c.root)
    elif prim == "allgather":
        def run():
            comm.Allgather(c.send, c.recv)
    elif prim == "scatter":
        def run():
            comm.Scatter(c.send, c.recv, c.root)
    elif prim == "reduce_scatter":
        def run():
            comm.Reduce_scatter_block(c.send, c.recv, c.op)
    elif prim == "alltoall":
        def run():
            comm.Alltoall(c.send, c.recv)
    elif prim == "barrier":
        def run():
            comm.Barrier()
    elif prim in ("gatherv", "scatterv", "allgatherv", "alltoallv"):
        run = _vcall(c, comm)       # the counts the v specs set (c.vcounts)
    elif prim == "scan":
        def run():
            comm.Scan(c.send, c.recv, c.op)
    elif prim == "exscan":
        def run():
            comm.Exscan(c.send, c.recv, c.op)
    else:
        raise ValueError(f"raw: no mpi4py call for {prim!r}")
    if am is None or am.name in ("numpy", "shm"):
        return run
    sync = am.sync

    def synced():
        sync()          # mpi4py and MPI do not wait for work queued on the stream
        run()
    return synced
