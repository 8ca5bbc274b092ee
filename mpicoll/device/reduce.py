"""The local reduction step every reducing algorithm takes, on host or device memory.

Built-in ops run as ufuncs writing in place (``out=``): NumPy's for host
arrays, the device library's own (CuPy's) for device arrays, so device data
is reduced on the device. User ops made with ``MPI.Op.Create`` run through
``Op.Reduce_local``; their Python function reads host memory, so for device
arrays the two operands make a round trip through the host. Operands are always
passed in rank order (lower ranks first), so non-commutative ops keep rank
order and both partners of an exchange compute bitwise-identical results.
"""
import time

import numpy as np

from ..core.ops import OPS, op_name
from .arrays import adapter_of

__all__ = ["combine", "trace_hook"]


#: Tracer callback ``hook("reduce", t0, t1, info)`` for the local reduction
#: step, or None (set by ``mpicoll.bench.trace`` between calls).
trace_hook = None


def combine(op, lower, higher, out):
    """Reduce ``lower (op) higher`` (lower-rank data first); return the result array.

    Built-in ops write into ``out`` (``lower``, ``higher`` or a third array
    of the same size) and return it. User ops follow MPI's Reduce_local contract and always
    write into ``higher``, which is returned; callers swap buffers
    accordingly instead of copying.
    """
    if trace_hook is not None:
        return _traced_combine(op, lower, higher, out)
    return _combine(op, lower, higher, out)


def _combine(op, lower, higher, out):
    entry = OPS.get(op.handle)
    ad = adapter_of(higher)
    if entry is not None:
        if ad is not None:
            ad.ufunc(entry[1].__name__)(lower, higher, out=out)
            return out
        # MPI defines no floating-point exceptions: a trap raised on one rank
        # mid-algorithm (np.seterr(all="raise")) would leave the others waiting.
        with np.errstate(all="ignore"):
            entry[1](lower, higher, out=out)
        return out
    if ad is not None:
        host = ad.asnumpy(higher)
        op.Reduce_local(ad.asnumpy(lower), host)
        ad.to_device(host, higher)
        return higher
    op.Reduce_local(lower, higher)
    return higher


def _traced_combine(op, lower, higher, out):
    hook, t0 = trace_hook, time.perf_counter()
    res = _combine(op, lower, higher, out)
    if hook is not None:
        hook("reduce", t0, time.perf_counter(), {"bytes": lower.nbytes, "op": op_name(op)})
    return res
