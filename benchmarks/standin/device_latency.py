"""Small-call cost on device arrays, measured on the CPU stand-in of a GPU.

    mpiexec -n 2 python benchmarks/standin/device_latency.py [--transport staged,ipc]
        [--bytes 8] [--algorithm ring,recursive_doubling] [-n 500] [--repeats 5]

The buffers are tests/support/fakedevice.py's fake device arrays (NumPy memory
behind an array type mpicoll treats as device memory; with IPC on, in
/dev/shm allocations a peer maps as CUDA IPC maps a peer's block). What
this measures is the Python and MPI cost of mpicoll's device path --
transport choice, staging or the ipc protocol, the memo -- not a GPU's:
no kernel launch, no stream synchronisation, no PCIe or NVLink. GPU
figures come from ``python -m mpicoll.bench latency --xp cupy`` on a GPU.
The table is mpicoll.bench.latency's, one per transport; ``raw`` copies
to the host, calls mpi4py and copies back, as a user without CUDA-aware
MPI would.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "support"))

import fakedevice as fd  # noqa: E402  (a test helper: found through the path above)
from mpi4py import MPI  # noqa: E402

from mpicoll.bench.latency import table  # noqa: E402
from mpicoll.device import arrays as _device  # noqa: E402


class FakeModule:
    """The ArrayModule face :func:`table` uses, on fake device arrays."""

    name, path = "fake", "staged"
    collectives = "staged"           # raw: staged by hand (the stand-in is not CUDA-aware)

    @staticmethod
    def empty(n, dtype):
        """An uninitialised stand-in device array."""
        return fd.device_empty(n, dtype)

    @staticmethod
    def to_host(a):
        """A host copy of a stand-in device array."""
        return fd.to_host(a)

    @staticmethod
    def put(dst, lo, host):
        """Copy host array ``host`` into ``dst`` from element ``lo``."""
        dst[lo:lo + host.size] = fd.to_device(host)

    @staticmethod
    def sync():
        """Nothing to wait for on the stand-in device."""
        pass


def main(argv=None):
    """Time each transport's small-call latency on the stand-in device."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transport", default="staged,ipc",
                   help="comma list of staged, ipc, aware (default staged,ipc)")
    p.add_argument("--bytes", default="8")
    p.add_argument("--algorithm", default="ring,recursive_doubling")
    p.add_argument("--primitive", default="allreduce", choices=("allreduce", "bcast", "barrier"))
    p.add_argument("-n", "--iters", type=int, default=500)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("-J", "--output", metavar="FILE")
    args = p.parse_args(argv)
    fd.install()
    fd.enable_ipc(True)
    _device.set_cuda_aware(False)
    comm = MPI.COMM_WORLD.Dup()
    try:
        for transport in args.transport.split(","):
            _device.set_transport(transport)
            table(comm, args.primitive, args.algorithm.split(","),
                  [int(b) for b in args.bytes.split(",")], args.iters, args.repeats,
                  FakeModule, f"CPU stand-in device arrays, transport {transport}", args.output)
    finally:
        comm.Free()
        fd.POOL.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
