"""A loop of collectives in which one rank fails: the fault-injection suite's program.

``python tests/support/faulty.py FAULT FACE [--raise]`` under ``mpiexec`` (or
``python -m mpicoll.run``), the watchdog's timeout from ``MPICOLL_TIMEOUT``.

FAULT, on the last rank (rank 1 at N=2), at the loop's 5th iteration:

- ``raise``: an exception in the user's own code, between two calls;
- ``exit``: ``os._exit(3)``; ``kill``: SIGKILL to itself;
- ``stop``: SIGSTOP to itself (a debugger, a swapped-out node): it makes no progress;
- ``hang``: it sleeps in its own code (a rank that never enters the call);
- ``linkdown``: it takes its node's link down (``ip link set eth0 down``; only on a
  ``scripts/netns_cluster.sh`` cluster, one rank per namespace) and goes on calling;
- ``none``: no fault (the loop completes: exit 0).

FACE: ``blocking`` (``mpicoll.allreduce``, ring), ``nonblocking`` (``iallreduce`` +
``Wait``), ``persistent`` (``allreduce_init``, ``Start``/``Wait``), ``shm`` (the shm
allreduce), ``p2pcomm`` (``P2PComm.Allreduce``), ``torch`` (``dist.all_reduce`` on the
``"mpicoll"`` backend, the group made with the timeout), ``distributed``
(``mpicoll.distributed.all_reduce``, the seed-compatible names).

``--raise``: ``MPICOLL_TIMEOUT_ACTION=raise`` semantics; a rank that catches
:class:`mpicoll.CollectiveTimeoutError` (or torch's error) prints ``CAUGHT <message>``,
then checks the communicator is refused, then exits 0 (its peer's fault is then the
job's status).
"""
import os
import signal
import sys
import time

import numpy as np
from mpi4py import MPI

import mpicoll

FAULT_AT = 5


def fault(kind, rank):
    print(f"FAULT {time.time():.3f}", flush=True)     # when (scripts/fault_matrix.py)
    if kind == "raise":
        raise RuntimeError(f"injected failure in user code on rank {rank}")
    if kind == "exit":
        os._exit(3)
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    if kind == "hang":
        time.sleep(3600)
    if kind == "linkdown":      # in a network namespace of its own (a "node"): cut its link
        import subprocess
        subprocess.run(["ip", "link", "set", "eth0", "down"], check=True)


def main():
    kind, face = sys.argv[1], sys.argv[2]
    print(f"PID {os.getpid()}", flush=True)     # the test looks for what it leaves behind
    raising = "--raise" in sys.argv
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    bad = size - 1
    x = np.full(1024, rank + 1.0)
    y = np.empty_like(x)
    want = size * (size + 1) / 2
    if face == "torch":
        return torch_loop(kind, rank, bad, raising)
    if face == "torch-alone":
        return torch_alone(rank)
    comm = world
    if raising:
        mpicoll.set_timeout(comm, float(os.environ.get("MPICOLL_TIMEOUT", "2")), action="raise")
    if face == "p2pcomm":
        comm = mpicoll.P2PComm(world, allreduce="ring")
    persistent = mpicoll.allreduce_init(x, y, algorithm="ring") if face == "persistent" else None
    if face == "distributed":
        import mpicoll.distributed as seed
        seed.init_process_group(backend="p2p")
    try:
        for i in range(20):
            if rank == bad and i == FAULT_AT:
                fault(kind, rank)
            if face == "blocking":
                mpicoll.allreduce(x, y, algorithm="ring")
            elif face == "shm":
                mpicoll.allreduce(x, y, algorithm="shm")
            elif face == "p2pcomm":
                comm.Allreduce(x, y)
            elif face == "nonblocking":
                mpicoll.iallreduce(x, y, algorithm="ring").Wait()
            elif face == "persistent":
                persistent.Start()
                persistent.Wait()
            elif face == "distributed":
                y[:] = x
                seed.all_reduce(y)
            assert y[0] == want, (y[0], want)
    except mpicoll.CollectiveTimeoutError as exc:
        print(f"CAUGHT rank {rank}: {exc}", flush=True)
        try:
            mpicoll.allreduce(x, y, algorithm="ring")
        except mpicoll.CollectiveTimeoutError as again:
            print(f"REFUSED rank {rank}: {again}", flush=True)
        time.sleep(1.5)   # the other waiting ranks catch theirs too
        os._exit(0)       # the peer that failed may never leave: do not wait in Finalize
    print(f"rank {rank} done", flush=True)


def torch_loop(kind, rank, bad, raising):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import mpicoll.torch  # noqa: F401

    seconds = float(os.environ.get("MPICOLL_TIMEOUT", "2"))
    dist.init_process_group(backend="mpicoll", timeout=timedelta(seconds=seconds))
    t = torch.ones(1024)
    try:
        for i in range(20):
            if rank == bad and i == FAULT_AT:
                fault(kind, rank)
            t.fill_(1.0)
            dist.all_reduce(t)
    except RuntimeError as exc:
        print(f"CAUGHT rank {rank}: {type(exc).__name__}: {exc}", flush=True)
        try:
            dist.all_reduce(t)
        except RuntimeError as again:
            print(f"REFUSED rank {rank}: {again}", flush=True)
        time.sleep(1.5)   # the other waiting ranks catch theirs too
        os._exit(0)
    print(f"rank {rank} done", flush=True)


def torch_alone(rank):
    """Torch's test_barrier_timeout: rank 0 alone calls barrier on a group with a 1 s timeout.

    It must raise torch's timeout error (no rank blocks in the group's set-up); then every
    rank meets on the default group, which still works, and the job ends cleanly.
    """
    from datetime import timedelta

    import torch.distributed as dist

    import mpicoll.torch  # noqa: F401

    dist.init_process_group(backend="mpicoll")
    group = dist.new_group(list(range(dist.get_world_size())), timeout=timedelta(seconds=1))
    if rank == 0:
        t0 = time.monotonic()
        try:
            dist.barrier(group)
        except RuntimeError as exc:
            print(f"CAUGHT rank {rank} after {time.monotonic() - t0:.2f} s: "
                  f"{type(exc).__name__}: {exc}", flush=True)
        try:
            dist.barrier(group)
        except RuntimeError as again:
            print(f"REFUSED rank {rank}: {again}", flush=True)
    import torch
    t = torch.full((4,), rank + 1.0)
    dist.all_reduce(t)                 # the default group is unaffected
    size = dist.get_world_size()
    assert t.tolist() == [size * (size + 1) / 2] * 4, t
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
