"""``--device {cpu,gpu}`` for the examples: where their tensors live, and which GPU each rank uses.

Every example calls :func:`setup` first (on every rank, like a collective)::

    xp, args = setup(argv, "The seed's all_reduce example ...")

``xp`` is ``numpy`` (``--device cpu``, the default) or ``cupy`` with this
rank's GPU made current (``--device gpu``), so the examples create their
tensors with ``xp.array`` / ``xp.zeros`` as torch code passes ``device=``.
GPU selection is :func:`mpicoll.gpu.select_device`: GPU ``local rank % GPUs``
(several ranks may share one GPU), ``MPICOLL_DEVICE=ID`` forces a device.
Without a usable GPU on some rank every rank stops at once with exit status
3 and one line naming why (no traceback, no hang). Printing goes through
:func:`_seedprint.host`, which copies a device array to NumPy.
"""
import argparse
import os
import sys

import numpy as np
from mpi4py import MPI

from mpicoll import gpu

__all__ = ["setup", "NO_GPU_EXIT"]

#: Exit status of ``--device gpu`` without a usable GPU (as the demo and jobs/bench_gpu.sh).
NO_GPU_EXIT = 3


class _Parser(argparse.ArgumentParser):
    """Help and usage errors are printed by rank 0 only (every rank exits the same way)."""

    def _print_message(self, message, file=None):
        if MPI.COMM_WORLD.Get_rank() == 0:
            super()._print_message(message, file)


def _fail(message):
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(NO_GPU_EXIT)


def setup(argv=None, description=None, extra=None):
    """Parse ``--device`` (and ``extra(parser)``'s arguments); return (array module, args)."""
    p = _Parser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="cpu: NumPy arrays (default); gpu: CuPy arrays, rank on GPU "
                        "'local rank %% GPUs' (MPICOLL_DEVICE=ID forces one; several ranks may "
                        "share a GPU); no usable GPU: exit status 3")
    if extra is not None:
        extra(p)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.device == "cpu":
        return np, args
    comm = MPI.COMM_WORLD
    # Every rank checks on its own, then all learn every verdict: the same decision everywhere.
    why = gpu.no_gpu_reason(comm)
    if why:
        if comm.Get_rank() == 0:
            _fail(f"--device gpu: {why}")
        raise SystemExit(NO_GPU_EXIT)
    try:
        gpu.select_device(comm)
    except RuntimeError as exc:
        _fail(f"--device gpu: rank {comm.Get_rank()}: {exc}")
    import cupy
    return cupy, args
