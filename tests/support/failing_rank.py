"""A tiny MPI program for tests/test_failfast.py: one rank fails, the others would wait.

``python tests/support/failing_rank.py MODE`` under mpiexec, main wrapped in run_main:

- ``raise``: rank 1 (or 0 alone) raises before a collective the others are already in;
- ``exit``: rank 1 calls ``sys.exit(3)`` while the others wait;
- ``late``: rank 1 raises after a few good collectives, while the others are in the next;
- ``agreed``: rank 1 passes a bad root; mpicoll raises ArgumentError on every rank;
- ``shm-raise`` / ``shm-die``: rank 1 raises (or its process ends, ``os._exit``) inside an
  shm allreduce, after the ranks have exchanged where their buffers are, while the others
  read its memory and wait in the node barrier;
- ``ok``: everyone finishes (exit 0).

Imported as a module (``python -m mpicoll.bench ... --import tests/support/failing_rank.py``) with
``MPICOLL_TEST_FAIL_ON_IMPORT=1``, rank 1 raises at import: an injected failure.
"""
import os
import sys

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.core.failfast import run_main


def main():
    mode = sys.argv[1]
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    bad = 1 if size > 1 else 0
    x = np.full(4, rank + 1.0)
    if mode == "late":
        for _ in range(3):
            mpicoll.allreduce(x)
    if rank == bad and mode in ("raise", "late"):
        raise RuntimeError(f"boom from rank {rank}")
    if rank == bad and mode == "exit":
        sys.exit(3)
    if mode.startswith("shm-"):
        from mpicoll.device import peer_memory as shm
        barrier = shm.Peers.barrier

        def dying(self):
            if rank == bad:
                if mode == "shm-die":
                    os._exit(9)
                raise RuntimeError(f"boom inside the shm allreduce on rank {rank}")
            barrier(self)
        shm.Peers.barrier = dying
        x = np.full(1 << 16, rank + 1.0)
        mpicoll.allreduce(x, algorithm="shm")
    if mode == "agreed":
        mpicoll.bcast(x, root=size + 7 if rank == bad else 0)
    y = mpicoll.allreduce(x)            # the others wait here for the failed rank
    mpicoll.barrier()
    print(f"rank {rank} done {y[0]:g}", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
elif os.environ.get("MPICOLL_TEST_FAIL_ON_IMPORT") == "1" and MPI.COMM_WORLD.Get_rank() == 1:
    raise RuntimeError("injected failure on import, rank 1")
