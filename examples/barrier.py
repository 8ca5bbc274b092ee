"""The seed's barrier on mpicoll.distributed: rank r sleeps r seconds, all wait for the slowest.

Run: mpirun -n 3 python -m mpicoll.run examples/barrier.py [SLEEP_SCALE] [--device gpu]
SLEEP_SCALE (default 1, the seed's) multiplies every rank's sleep. The
barrier moves no tensor; --device gpu only selects each rank's GPU, as in
the other examples.
"""
import time

import mpicoll.distributed as dist

from _device import setup
from _seedprint import print_ranks


def init_process():
    """Join the process group on mpicoll's hand-written (point-to-point) backend."""
    dist.init_process_group(backend="p2p")


def example_barrier(scale=1.0):
    """Sleep rank x scale seconds, wait at the barrier, print how long each rank waited."""
    rank = dist.get_rank()
    t_start = time.time()
    print_ranks(f"Rank {rank} sleeps {rank * scale:g} seconds.")
    time.sleep(rank * scale)  # simulate different processing times
    dist.barrier()
    print_ranks(f"Rank {rank} after barrier time delta: {time.time()-t_start:.4f}")


def _scale_arg(p):
    p.add_argument("sleep_scale", metavar="SLEEP_SCALE", type=float, nargs="?", default=1.0,
                   help="multiplies every rank's sleep (default 1, the seed's)")


def main(argv=None):
    """Parse the arguments (--device), join the group, run the example."""
    _, args = setup(argv, __doc__, extra=_scale_arg)
    init_process()
    example_barrier(args.sleep_scale)


if __name__ == "__main__":
    main()
