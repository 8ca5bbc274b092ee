"""Reduction operations: MPI's built-in ops, their NumPy ufuncs, and which dtypes they take.

Built-in ops run as ufuncs writing in place (``out=``); the local step that
applies them to host or device memory is :func:`mpicoll.device.reduce.combine`.
User ops made with ``MPI.Op.Create`` run through ``Op.Reduce_local``.
"""
import numpy as np
from mpi4py import MPI

from .errors import ArgumentError, ArgumentTypeError, describe

__all__ = ["OPS", "check_op", "op_name", "op_ufunc", "OP_NAMES", "parse_op",
           "TORCH_OPS"]

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


def op_ufunc(op):
    """The NumPy ufunc of a built-in op, or None for a user op."""
    entry = OPS.get(op.handle)
    return entry[1] if entry is not None else None


#: The op names the command lines take (nccl-tests' ``-o``): lower-case MPI op names.
OP_NAMES = ("sum", "prod", "min", "max")


def parse_op(name):
    """'sum' -> MPI.SUM (prod, min, max likewise)."""
    key = str(name).strip().lower()
    if key not in OP_NAMES:
        raise ValueError(f"expected an op among {', '.join(OP_NAMES)}; got {name!r}")
    return getattr(MPI, key.upper())


#: torch.distributed's ``ReduceOp`` names -> the MPI op name that carries them. AVG and
#: PREMUL_SUM ride on SUM with a division by N after it or a multiplication before it
#: (done by their callers). Read by both torch faces: :mod:`mpicoll.distributed` (torch's
#: names on NumPy arrays, no torch needed) and the torch backend (``mpicoll.torch._ops``).
TORCH_OPS = {"SUM": "SUM", "PRODUCT": "PROD", "MIN": "MIN", "MAX": "MAX",
             "BAND": "BAND", "BOR": "BOR", "BXOR": "BXOR", "AVG": "SUM", "PREMUL_SUM": "SUM"}
