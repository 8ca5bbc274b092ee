"""Sparse COO ``all_reduce`` (SUM, as gloo): every rank's entries gathered, then summed.

The ranks first gather one small record each (entry count, sparse and dense
dimensions, dtype, shape), so that tensors that differ between ranks raise the
same :class:`mpicoll.CollectiveMismatchError` on every rank before any entry
moves; then the indices and the values travel by ``mpicoll.allgatherv`` (each
rank's entries back to back in rank order), and every rank adds the ranks'
tensors in rank order and coalesces: the same bits everywhere.
"""
import numpy as np
import torch

import mpicoll

from ..engine.fingerprint import CollectiveMismatchError
from . import _tensors

__all__ = ["allreduce_sum", "MAX_DIMS"]

#: Dimensions a sparse tensor may have here (the shape travels in a fixed-size record).
MAX_DIMS = 16
_DTYPES = list(_tensors.SUPPORTED)


def _record(t):
    """This rank's record: nnz, sparse_dim, dense_dim, dtype code, then the shape, padded."""
    shape = list(t.shape) + [-1] * (MAX_DIMS - t.dim())
    return np.array([t._nnz(), t.sparse_dim(), t.dense_dim(), _DTYPES.index(t.dtype), *shape],
                    dtype=np.int64)


def allreduce_sum(comm, t, algorithm=None):
    """Replace sparse COO tensor ``t`` by the sum of every rank's ``t`` (coalesced).

    ``t``: checked by the caller (COO layout, a dtype the backend runs, at most
    :data:`MAX_DIMS` dimensions).
    """
    local = t.detach().coalesce()
    records = mpicoll.allgather(_record(local), comm=comm).reshape(comm.Get_size(), -1)
    differ = [r for r in range(len(records)) if not np.array_equal(records[r, 1:], records[0, 1:])]
    if differ:
        def says(r):
            rec = records[r]
            shape = tuple(int(x) for x in rec[4:4 + rec[1] + rec[2]])
            return (f"rank {r}: {_DTYPES[rec[3]]} of shape {shape} with {rec[1]} sparse "
                    f"dimension(s)")
        raise CollectiveMismatchError(
            "tensor: the ranks' sparse tensors differ (" + "; ".join(says(r) for r in [0, *differ])
            + "); expected one dtype, shape and sparse dimension count on every rank")
    nnz = [int(n) for n in records[:, 0]]
    carrier = _tensors.SUPPORTED[t.dtype]
    indices = local._indices().to("cpu", torch.int64).contiguous()
    values = local._values().to("cpu").contiguous()
    dense = tuple(values.shape[1:])
    per_entry = int(np.prod(dense, dtype=np.int64))
    all_indices = torch.empty(local.sparse_dim(), sum(nnz), dtype=torch.int64)
    # Indices row by row: row d of every rank, back to back.
    for d in range(local.sparse_dim()):
        mpicoll.allgatherv(indices[d].numpy(), [all_indices[d].numpy(), nnz], comm=comm,
                           algorithm=algorithm)
    all_values = torch.empty((sum(nnz), *dense), dtype=t.dtype)
    flat_in = values.reshape(-1).view(carrier.view_as).numpy()
    flat_out = all_values.reshape(-1).view(carrier.view_as).numpy()
    mpicoll.allgatherv(flat_in, [flat_out, [n * per_entry for n in nnz]], comm=comm,
                       algorithm=algorithm)
    total, off = None, 0
    for n in nnz:
        part = torch.sparse_coo_tensor(all_indices[:, off:off + n], all_values[off:off + n],
                                       t.shape)
        total = part if total is None else total + part
        off += n
    t.copy_(total.coalesce().to(t.device))
