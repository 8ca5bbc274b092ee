"""Rank-ordered printing for the examples: every rank's line goes to rank 0, printed in order.

The seed warns that plain ``print`` calls from several ranks interleave; the
examples call :func:`print_ranks` instead (every rank must call it, as for a
collective) so that their output can be read, and parsed, line by line.
Tensors are printed through :func:`host`: a GPU (CuPy) array is copied to
NumPy first, so ``--device gpu`` prints exactly what ``--device cpu`` does.
"""
import numpy as np
from mpi4py import MPI


def print_ranks(text):
    """Print each rank's ``text`` (None prints nothing) on rank 0, in rank order."""
    comm = MPI.COMM_WORLD
    texts = comm.gather(text, root=0)
    if comm.Get_rank() == 0:
        for t in texts:
            if t is not None:
                print(t)
        print(flush=True)


def host(tensor):
    """A NumPy array with the tensor's values: device arrays (CuPy) are copied with ``.get()``."""
    return tensor if isinstance(tensor, np.ndarray) else tensor.get()


def tensor_list(tensors):
    """A list of arrays laid out like the seed's printed tensor lists."""
    return "[\n" + ",\n".join(f"    {host(t)}" for t in tensors) + "\n]"
