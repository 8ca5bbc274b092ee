"""Shared memory on a node: symmetric arrays, and what ``python -m mpicoll.shm`` reports.

The ``shm`` algorithms (``algorithm="shm"``: allreduce, reduce_scatter,
reduce, bcast, gather, scatter, allgather, alltoall, barrier) read their
peers' data straight from memory instead of sending messages. On ordinary
NumPy arrays they read by cross-memory attach (one copy; where the kernel
refuses it, through a scratch segment); on arrays made here they read in
place (no copy)::

    x = mpicoll.shm.empty(n, np.float32)           # this rank's part of a shared window
    y = mpicoll.shm.zeros(n, np.float32, shared=True)   # one array for the whole node
    mpicoll.allreduce(x, y, algorithm="shm")       # each rank writes its slice of y

Arrays are *symmetric*: every rank of the node makes the same calls (same
shapes, same order), so an array is at the same place in every rank's part.
``python -m mpicoll.shm`` (under ``mpirun``) prints, per node, whether
single-copy reads work and, where not, why, and the segments in use.
"""
import sys

from mpi4py import MPI

from ..device.peer_memory import empty, free, probe, shm_max, stats, zeros

__all__ = ["empty", "zeros", "free", "stats", "report", "main"]


def report(comm=None):
    """What the shm algorithms use on ``comm``'s nodes (collective).

    Per node, its ranks, whether cross-memory attach works (and why not), the segment cap;
    this rank's windows.
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        ok, why = probe(node)
        host = MPI.Get_processor_name()
        mine = dict(host=host, ranks=node.Get_size(), cma=ok, why=why,
                    leader=node.Get_rank() == 0)
    finally:
        node.Free()
    nodes = [d for d in comm.allgather(mine) if d["leader"]]
    return {"nodes": [{k: v for k, v in d.items() if k != "leader"} for d in nodes],
            "path": "cma" if all(d["cma"] for d in nodes) else "segment",
            "segment_max_bytes": shm_max(), "windows": stats()}


def main(argv=None):
    """``python -m mpicoll.shm``: print :func:`report` on rank 0."""
    rep = report()
    if MPI.COMM_WORLD.Get_rank() == 0:
        for d in rep["nodes"]:
            how = ("in one copy (cross-memory attach)" if d["cma"] else
                   f"through the scratch segment ({d['why']})")
            print(f"{d['host']}: {d['ranks']} ranks; peers' ordinary buffers are read {how}")
        print(f"scratch segment: at most {rep['segment_max_bytes']} bytes per rank "
              f"(MPICOLL_SHM_MAX); symmetric arrays: mpicoll.shm.empty / zeros")
        sys.stdout.flush()
    return 0

