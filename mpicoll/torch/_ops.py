"""torch's ``ReduceOp`` as an MPI op, with the steps MPI has no op for.

- ``SUM``, ``PRODUCT``, ``MIN``, ``MAX``, ``BAND``, ``BOR``, ``BXOR``: MPI's own
  (``MPI.SUM``, ``MPI.PROD``, ...), reduced by NumPy/CuPy ufuncs.
- ``AVG``: ``SUM``, then the result divided by the group size (floating and
  complex dtypes; integers raise, as NCCL does).
- ``PREMUL_SUM`` (``dist._make_nccl_premul_sum(factor)``): every input
  multiplied by ``factor`` first, then ``SUM`` (floating and complex dtypes).
- ``bool`` tensors: ``SUM`` and ``MAX``/``BOR`` are logical or, ``PRODUCT`` and
  ``MIN``/``BAND`` logical and, ``BXOR`` logical xor (what NCCL does with them).
- dtypes NumPy or the MPI library cannot reduce (bfloat16; float16 where MPI
  has no 16-bit float): an MPI user op (``MPI.Op.Create``) that views both
  operands as the real dtype and does the arithmetic in torch, rounding to
  that dtype at every step as gloo and NCCL do.
"""
import torch
import torch.distributed as dist
from mpi4py import MPI

from ..core.errors import ArgumentError, ArgumentTypeError, describe
from ..core.ops import TORCH_OPS

__all__ = ["Reduction", "reduction"]

_R = dist.ReduceOp.RedOpType
# torch's op -> the MPI op that carries it: the table mpicoll.distributed reads too
_MPI = {getattr(_R, name): getattr(MPI, mpi) for name, mpi in TORCH_OPS.items()}
_BOOL = {_R.SUM: MPI.LOR, _R.MAX: MPI.LOR, _R.BOR: MPI.LOR,
         _R.PRODUCT: MPI.LAND, _R.MIN: MPI.LAND, _R.BAND: MPI.LAND, _R.BXOR: MPI.LXOR}
_TORCH_MATH = {MPI.SUM.handle: torch.add, MPI.PROD.handle: torch.mul,
               MPI.MIN.handle: torch.minimum, MPI.MAX.handle: torch.maximum}
_user_ops = {}


class Reduction:
    """One torch reduction on one dtype: the MPI ``op`` and the scaling around it.

    ``premul``: factor every input is multiplied by first (PREMUL_SUM), else None;
    ``divide``: the result is divided by the group size (AVG).
    """

    __slots__ = ("op", "premul", "divide", "name")

    def __init__(self, op, premul=None, divide=False, name=""):
        self.op, self.premul, self.divide, self.name = op, premul, divide, name

    def scale_input(self, t):
        """``t`` multiplied by the PREMUL_SUM factor, in place."""
        factor = self.premul
        if isinstance(factor, torch.Tensor):
            factor = factor.to(t.device)
        t.mul_(factor)

    def finish(self, t, size):
        """The result ``t`` after MPI's part: divided by ``size`` for AVG, in place.

        Complex numbers part by part, as torch's all_reduce, which hands them over as real
        views.
        """
        if self.divide:
            (torch.view_as_real(t) if t.is_complex() else t).div_(size)


def _user_op(dtype, base):
    """An MPI user op doing ``base`` (MPI.SUM, ...) in torch on ``dtype``'s bits."""
    key = (dtype, base.handle)
    op = _user_ops.get(key)
    if op is None:
        math = _TORCH_MATH[base.handle]

        def fn(inbuf, inoutbuf, datatype):
            lower = torch.frombuffer(inbuf, dtype=dtype)
            higher = torch.frombuffer(inoutbuf, dtype=dtype)
            math(lower, higher, out=higher)
        op = _user_ops[key] = MPI.Op.Create(fn, commute=True)
    return op


def reduction(argname, op, carrier):
    """The :class:`Reduction` of torch ``op`` on tensors of ``carrier``'s dtype.

    Raises :class:`mpicoll.ArgumentError` (naming ``argname``) where torch's
    semantics give no answer: AVG or PREMUL_SUM of integers or bools,
    bitwise ops on floating data, MIN/MAX of complex numbers.
    """
    kind = op.op if isinstance(op, dist.ReduceOp) else op
    key = (kind, carrier.torch_dtype)
    red = _cache.get(key)
    if red is None:
        red = _reduction(argname, kind, carrier)
        if kind != _R.PREMUL_SUM:
            _cache[key] = red
    if kind == _R.PREMUL_SUM:
        if not isinstance(op, dist.ReduceOp):
            raise ArgumentError(f"{argname}: PREMUL_SUM needs its factor: pass "
                                f"dist._make_nccl_premul_sum(factor)", MPI.ERR_OP)
        red = Reduction(red.op, premul=op.factor, name=red.name)
    return red


_cache = {}


def _reduction(argname, kind, carrier):
    if not isinstance(kind, _R):
        raise ArgumentTypeError(f"{argname}: expected a torch.distributed.ReduceOp; got "
                                f"{describe(kind)}", MPI.ERR_OP)
    dtype = carrier.torch_dtype
    name = str(kind).rsplit(".", 1)[-1]
    if dtype is torch.bool:
        if kind not in _BOOL:
            raise ArgumentError(f"{argname}: ReduceOp.{name} is not defined for bool tensors",
                                MPI.ERR_OP)
        return Reduction(_BOOL[kind], name=name)
    floating = dtype.is_floating_point or dtype.is_complex
    if kind in (_R.AVG, _R.PREMUL_SUM) and not floating:
        raise ArgumentError(f"{argname}: ReduceOp.{name} needs a floating or complex dtype; got "
                            f"{dtype}", MPI.ERR_OP)
    if kind in (_R.BAND, _R.BOR, _R.BXOR) and floating:
        raise ArgumentError(f"{argname}: ReduceOp.{name} is defined for integer and bool "
                            f"tensors; got {dtype}", MPI.ERR_OP)
    if kind in (_R.MIN, _R.MAX) and dtype.is_complex:
        raise ArgumentError(f"{argname}: ReduceOp.{name} is not defined for complex tensors",
                            MPI.ERR_OP)
    mpi_op = _MPI[kind]
    if not carrier.native_math:
        mpi_op = _user_op(dtype, mpi_op)
    return Reduction(mpi_op, divide=kind == _R.AVG, name=name)
