"""The stand-in's torch.distributed: a gloo process group over mpi4py's COMM_WORLD."""
import os

from mpi4py import MPI

_state = {"init": False}


def is_available():
    return True


def is_gloo_available():
    return True


class ReduceOp:
    SUM, PRODUCT, MIN, MAX = MPI.SUM, MPI.PROD, MPI.MIN, MPI.MAX


class TCPStore:
    def __init__(self, host, port, world_size, is_master, timeout=None):
        self.host, self.port = host, port or 29500
        self.world_size, self.is_master = world_size, is_master


def init_process_group(backend, store=None, rank=None, world_size=None, timeout=None):
    assert backend == "gloo" and isinstance(store, TCPStore)
    assert rank == MPI.COMM_WORLD.Get_rank() and world_size == MPI.COMM_WORLD.Get_size()
    _state["init"] = True


def destroy_process_group():
    assert _state["init"]
    _state["init"] = False


def all_reduce(tensor, op=ReduceOp.SUM):
    assert _state["init"]
    if os.environ.get("FAKE_TORCH_WRONG") != "1":
        MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, tensor.array, op)


def broadcast(tensor, src):
    assert _state["init"]
    MPI.COMM_WORLD.Bcast(tensor.array, root=src)
