"""Reduction operations: which MPI ops are valid for which dtype, and the
local combine step every reducing algorithm uses.

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
from mpi4py import MPI

from ._device import adapter_of
from ._errors import ArgumentError, ArgumentTypeError, describe

__all__ = ["OPS", "check_op", "combine", "op_name", "op_ufunc"]

_BUILTIN = [
    (MPI.SUM, "SUM", np.add),
    (MPI.PROD, "PROD", np.multiply),
    (MPI.MIN, "MIN", np.minimum),
    (MPI.MAX, "MAX", np.maximum),
    (MPI.LAND, "LAND", np.logical_and),
    (MPI.LOR, "LOR", np.logical_or),
    (MPI.LXOR, "LXOR", np.logical_xor),
    (MPI.BAND, "BAND", np.bitwise_and),
    (MPI.BOR, "BOR", np.bitwise_or),
    (MPI.BXOR, "BXOR", np.bitwise_xor),
]
#: MPI built-in op handle -> (name, NumPy ufunc); MPI.Op objects are not hashable.
OPS = {op.handle: (name, ufunc) for op, name, ufunc in _BUILTIN}

# MPI's rules (MPI 4.1, section 6.9.2): which op groups apply to which types.
_VALID_KINDS = {
    "SUM": "iufc", "PROD": "iufc", "MIN": "iuf", "MAX": "iuf",
    "LAND": "iub", "LOR": "iub", "LXOR": "iub",
    "BAND": "iu", "BOR": "iu", "BXOR": "iu",
}
_KIND_NAMES = {"i": "signed integer", "u": "unsigned integer", "f": "floating",
               "c": "complex", "b": "bool"}


def op_name(op):
    """Human name of an op: 'SUM', ..., or 'user op' for Op.Create'd ones."""
    if not isinstance(op, MPI.Op):
        return repr(op)
    entry = OPS.get(op.handle)
    return entry[0] if entry is not None else "user op"


def check_op(op, dtype, *, argname="op"):
    """Raise ArgumentError unless ``op`` is an MPI op valid for ``dtype``."""
    if not isinstance(op, MPI.Op):
        raise ArgumentTypeError(
            f"{argname}: expected an mpi4py.MPI.Op (MPI.SUM, ..., or MPI.Op.Create(...)); "
            f"got {describe(op)}", MPI.ERR_OP)
    if op == MPI.OP_NULL:
        raise ArgumentError(f"{argname}: expected a valid MPI op; got MPI.OP_NULL", MPI.ERR_OP)
    entry = OPS.get(op.handle)
    if entry is None:
        if op.is_predefined:
            supported = ", ".join(f"MPI.{name}" for name, _ in OPS.values())
            raise ArgumentError(
                f"{argname}: expected one of {supported} or a user op; got a predefined op "
                f"mpicoll does not support (MAXLOC, MINLOC, REPLACE and NO_OP need pair "
                f"types or one-sided semantics)", MPI.ERR_OP)
        return  # user op: valid for any datatype the user function accepts
    name = entry[0]
    if dtype.kind not in _VALID_KINDS[name]:
        kinds = ", ".join(_KIND_NAMES[k] for k in _VALID_KINDS[name])
        raise ArgumentError(
            f"{argname}: MPI.{name} is defined for {kinds} data; got dtype {dtype}",
            MPI.ERR_OP)


#: Tracer callback ``hook("reduce", t0, t1, info)`` for the local reduction
#: step, or None (set by ``mpicoll.bench.trace`` between calls).
trace_hook = None


def op_ufunc(op):
    """The NumPy ufunc of a built-in op, or None for a user op."""
    entry = OPS.get(op.handle)
    return entry[1] if entry is not None else None


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
