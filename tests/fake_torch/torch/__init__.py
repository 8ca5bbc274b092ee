"""A stand-in for torch, enough for mpicoll.bench's gloo column (tests/test_bench.py).

Tensors wrap the array they were made from (no copy, as ``torch.from_numpy``
shares memory); ``torch.distributed`` (the module beside this one) runs its
collectives with mpi4py on those arrays. ``FAKE_TORCH_MISSING_ON_RANK=R``
makes ``import torch`` fail on world rank R; ``FAKE_TORCH_WRONG=1`` makes
``all_reduce`` leave its tensor unchanged (a wrong result for the check).
"""
import os

__version__ = "0.0-fake"

if os.environ.get("FAKE_TORCH_MISSING_ON_RANK") is not None:
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_rank() == int(os.environ["FAKE_TORCH_MISSING_ON_RANK"]):
        raise ImportError("fake torch: not installed on this rank")

float16, float32, float64 = "float16", "float32", "float64"
int8, uint8, int16, int32, int64 = "int8", "uint8", "int16", "int32", "int64"


class Tensor:
    def __init__(self, array):
        self.array = array


def from_numpy(a):
    return Tensor(a)


def from_dlpack(a):
    return Tensor(a)
