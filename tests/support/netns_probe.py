"""Where am I? One JSON line per rank, for the namespace cluster (scripts/netns_cluster.sh).

    mpiexec ... python tests/support/netns_probe.py [--pingpong BYTES] [--iters N] [--allreduce]

Each rank prints (rank order, one line each, prefixed ``PROBE``)::

    PROBE {"rank": 0, "size": 4, "ip": "10.77.0.11", "netns": "mpc-h1", "shared": 2,
           "nodes": [[0, 1], [2, 3]], "slurm_node": null, "pingpong_us": {"1": 1.2, "2": 45.0}}

- ``ip``: this process's address on the cluster bridge (a UDP connect, no packet sent);
- ``netns``: the name under /run/netns of this process's network namespace (None outside);
- ``shared``: ``COMM_WORLD.Split_type(COMM_TYPE_SHARED).Get_size()`` (what MPI thinks a node is);
- ``nodes``: mpicoll's layout of its private communicator (``mpicoll.core.topology.layout``);
- ``pingpong_us`` (``--pingpong BYTES``): rank 0's half round trip, in microseconds (median
  of ``--iters``), with every other rank in turn;
- ``allreduce_ok`` (``--allreduce``): ``mpicoll.allreduce`` (recursive doubling) of known float64
  vectors equals numpy's sum, on every rank.
"""
import argparse
import json
import os
import socket
import sys

import numpy as np
from mpi4py import MPI


def bridge_ip(bridge="10.77.0.1"):
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((bridge, 9))          # UDP: picks the route, sends nothing
            return s.getsockname()[0]
    except OSError:
        return None


def netns_name():
    try:
        me = os.stat("/proc/self/ns/net")
        for name in sorted(os.listdir("/run/netns")):
            st = os.stat(os.path.join("/run/netns", name))
            if (st.st_dev, st.st_ino) == (me.st_dev, me.st_ino):
                return name
    except OSError:
        pass
    return None


def pingpong(comm, peer, nbytes, iters):
    """Rank 0 <-> ``peer``: median half round trip in microseconds (on rank 0; None elsewhere)."""
    buf = np.zeros(max(nbytes, 1), dtype=np.uint8)
    rank = comm.Get_rank()
    times = []
    for i in range(iters + 5):
        if rank == 0:
            t0 = MPI.Wtime()
            comm.Send(buf, dest=peer, tag=7)
            comm.Recv(buf, source=peer, tag=7)
            if i >= 5:
                times.append((MPI.Wtime() - t0) / 2)
        elif rank == peer:
            comm.Recv(buf, source=0, tag=7)
            comm.Send(buf, dest=0, tag=7)
    return float(np.median(times)) * 1e6 if times else None


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--pingpong", type=int, default=0, metavar="BYTES")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--allreduce", action="store_true")
    args = ap.parse_args(argv)

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    info = {"rank": rank, "size": size, "ip": bridge_ip(), "netns": netns_name(),
            "shared": local.Get_size(), "host": MPI.Get_processor_name(),
            "slurm_node": os.environ.get("SLURMD_NODENAME")}
    local.Free()

    from mpicoll.core.topology import layout
    from mpicoll.engine.context import private_comm
    lay = layout(private_comm(comm))
    info["nodes"] = [list(m) for m in lay.members]

    if args.pingpong:
        pp = {}
        for peer in range(1, size):
            comm.Barrier()
            t = pingpong(comm, peer, args.pingpong, args.iters)
            if rank == 0:
                pp[str(peer)] = round(t, 2)
        if rank == 0:
            info["pingpong_us"] = pp
            info["pingpong_bytes"] = args.pingpong

    if args.allreduce:
        import mpicoll
        n = 1000
        x = np.arange(n, dtype=np.float64) * (rank + 1) + rank
        y = np.empty_like(x)
        mpicoll.allreduce(x, y, algorithm="recursive_doubling")
        want = sum(np.arange(n, dtype=np.float64) * (r + 1) + r for r in range(size))
        info["allreduce_ok"] = bool(np.allclose(y, want))

    # One line per rank, in rank order (gathered to rank 0: no interleaving).
    lines = comm.gather(json.dumps(info, sort_keys=True), root=0)
    if rank == 0:
        for line in lines:
            print("PROBE " + line)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
