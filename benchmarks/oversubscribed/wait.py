"""How a rank waits matters with more ranks than cores: MPI_Waitany vs Wait vs Testany + yield.

    mpiexec -n 3 python benchmarks/oversubscribed/wait.py

Per call, median of 5 batches of 200 (ms), rank 0's clock, after a barrier:
the native Iallgather of 128 bytes (mpicoll's agreement step) completed by
Wait, Waitall, Waitany, a Test loop and a Testany + sched_yield loop; and
a 3-int Scatter / Iscatter().Wait() (root cycling) natively and on
mpicoll.P2PComm.
"""
import os
import statistics
import time

import numpy as np
from mpi4py import MPI

import mpicoll

W = MPI.COMM_WORLD
N, R = W.Get_size(), W.Get_rank()
PC = mpicoll.P2PComm(W)
MINE, RAW = bytearray(128), bytearray(128 * N)


def per_call(fn, reps=200, batches=5):
    """``fn(i)``'s time per call in µs: the median of ``batches`` batches of ``reps``."""
    out = []
    for _ in range(batches):
        W.Barrier()
        t0 = time.perf_counter()
        for i in range(reps):
            fn(i)
        out.append((time.perf_counter() - t0) / reps * 1e3)
    return statistics.median(out)


def iallgather():
    """Start the nonblocking allgather every variant waits on."""
    return W.Iallgather([MINE, MPI.BYTE], [RAW, MPI.BYTE])


def test_loop(i):
    """Wait by spinning on ``Test``."""
    q = iallgather()
    while not q.Test():
        pass


def testany_yield(i):
    """Wait by ``Testany`` and a ``sched_yield`` between polls."""
    q = [iallgather()]
    while not MPI.Request.Testany(q)[1]:
        os.sched_yield()


def scatter(comm, nonblocking):
    """A call of scatter with a rotating root, blocking or nonblocking."""
    def run(i):
        root = i % N
        s = np.full((N, 3), root, "i") if R == root else None
        r = np.empty(3, "i")
        if nonblocking:
            comm.Iscatter(s, r, root=root).Wait()
        else:
            comm.Scatter(s, r, root=root)
    return run


rows = {
    "Allgather": lambda i: W.Allgather([MINE, MPI.BYTE], [RAW, MPI.BYTE]),
    "Iallgather + Wait": lambda i: iallgather().Wait(),
    "Iallgather + Waitall": lambda i: MPI.Request.Waitall([iallgather()]),
    "Iallgather + Waitany": lambda i: MPI.Request.Waitany([iallgather()]),
    "Iallgather + Test loop": test_loop,
    "Iallgather + Testany/sched_yield": testany_yield,
    "native Scatter": scatter(W, False),
    "native Iscatter.Wait": scatter(W, True),
    "P2PComm Scatter": scatter(PC, False),
    "P2PComm Iscatter.Wait": scatter(PC, True),
}
res = {name: per_call(fn) for name, fn in rows.items()}
if R == 0:
    print(f"N={N}, {os.cpu_count()} cores, {MPI.Get_library_version().splitlines()[0].strip()}")
    for name, ms in res.items():
        print(f"  {name:<34} {ms:8.3f} ms")
