"""One-way time of a message between rank 0 and every other rank (median of ping-pongs).

    mpiexec -n N python benchmarks/simulate/validate/pingpong.py [BYTES...]

Rank 0 prints one JSON line per (peer, size): its host, the peer's host and the median one-way
time in µs over 200 round trips (after 20 untimed ones). The validation uses it to give the
simulated platform the latency the namespaces' links really have.
"""
import json
import sys

import numpy as np
from mpi4py import MPI


def main(sizes):
    """Ping-pong rank 0 with every other rank at each size; rank 0 prints the medians."""
    comm = MPI.COMM_WORLD
    rank, host = comm.Get_rank(), MPI.Get_processor_name()
    hosts = comm.allgather(host)
    for peer in range(1, comm.Get_size()):
        for nbytes in sizes:
            buf = np.zeros(max(nbytes, 1), np.uint8)
            times = []
            for i in range(220):
                comm.Barrier()
                if rank == 0:
                    t = MPI.Wtime()
                    comm.Send(buf, peer, 7)
                    comm.Recv(buf, peer, 7)
                    if i >= 20:
                        times.append((MPI.Wtime() - t) / 2)
                elif rank == peer:
                    comm.Recv(buf, 0, 7)
                    comm.Send(buf, 0, 7)
            if rank == 0:
                print(json.dumps({"from": hosts[0], "to": hosts[peer], "bytes": nbytes,
                                  "one_way_us": float(np.median(times)) * 1e6}), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [8])
