"""Checks that turn user arrays into the flat, contiguous views algorithms use.

Host arrays are NumPy arrays; device arrays are CuPy arrays (or any type a
:mod:`mpicoll.device.arrays` adapter recognises). One call's buffers must all be
of one kind, on one device: the algorithms reduce and copy between them.

Every check raises :class:`ArgumentError` naming the argument, what was
expected and what was given. Nothing here sends a message.
"""
import operator

import numpy as np
from mpi4py import MPI

from ..core.errors import ArgumentError, ArgumentTypeError, describe
from ..device.arrays import adapter_of, data_ptr, empty

__all__ = ["is_device", "as_array", "check_dtype", "same_dtype", "same_memory",
           "check_size", "check_root", "check_counts", "check_no_alias", "IN_PLACE", "ENTRIES",
           "wire", "is_in_place", "not_in_place", "recv_array", "snapshot", "whole_blocks"]

IN_PLACE = MPI.IN_PLACE


def is_device(obj):
    """True for an array in device memory (CuPy, or a registered adapter's type)."""
    return adapter_of(obj) is not None


_dtype_ok = {}


#: Metadata key of the NumPy ``void`` dtype of whole packed datatype entries
#: (:mod:`mpicoll.args.user_ops`): such arrays travel as ``[array, MPI.BYTE]``.
ENTRIES = "mpicoll.entries"


def wire(buf):
    """What mpi4py is handed for ``buf``: the array, or ``[buf, MPI.BYTE]`` for packed entries."""
    return [buf, MPI.BYTE] if buf.dtype.kind == "V" else buf


def check_dtype(argname, dtype):
    """Raise unless mpi4py maps ``dtype`` to a predefined MPI datatype."""
    ok = _dtype_ok.get(dtype)
    if ok is None:
        ok = ""
        if dtype.metadata and dtype.metadata.get(ENTRIES):
            # packed entries of a derived datatype (mpicoll.args.user_ops): sent as bytes
            pass
        elif dtype.byteorder not in "=|" and dtype.byteorder != ("<" if np.little_endian else ">"):
            ok = (f"expected data in native byte order; got byte-swapped dtype {dtype.str} "
                  f"(convert with .astype(a.dtype.newbyteorder('=')))")
        else:
            # mpi4py's own typecode table: what it uses to send this array.
            try:
                if (dtype.kind not in "biufc" or dtype.fields is not None
                        or dtype.subdtype is not None):
                    raise ValueError(dtype)
                mpitype = MPI.Datatype.fromcode(dtype.char)
                if mpitype == MPI.DATATYPE_NULL or mpitype.Get_size() != dtype.itemsize:
                    raise ValueError(dtype)
            except (ValueError, KeyError, TypeError):
                ok = f"expected a numeric or bool dtype that MPI can send; got {dtype}"
        _dtype_ok[dtype] = ok
    if ok:
        raise ArgumentError(f"{argname}: {ok}", MPI.ERR_TYPE)


def as_array(argname, obj, *, writable=False):
    """Validate a user buffer; return a flat (1-D) view of it."""
    ad = adapter_of(obj)
    if ad is None and not isinstance(obj, np.ndarray):
        raise ArgumentTypeError(
            f"{argname}: expected a NumPy or CuPy array; got {describe(obj)}")
    check_dtype(argname, obj.dtype)
    if not obj.flags.c_contiguous:
        how = "numpy.ascontiguousarray" if ad is None else f"{ad.name}.ascontiguousarray"
        raise ArgumentError(
            f"{argname}: expected a C-contiguous array; got a non-contiguous view of shape "
            f"{obj.shape} with strides {obj.strides} (use {how})", MPI.ERR_BUFFER)
    if writable and ad is None and not obj.flags.writeable:
        raise ArgumentError(
            f"{argname}: expected a writable array (it receives data); got a read-only array",
            MPI.ERR_BUFFER)
    return obj.reshape(-1)


def _memory(a):
    ad = adapter_of(a)
    return ("host", None) if ad is None else (ad.name, ad.device_id(a))


def _memory_name(mem):
    kind, dev = mem
    return "a NumPy (host) array" if kind == "host" else f"a {kind} array on device {dev}"


def same_memory(name_a, a, name_b, b):
    """Raise unless ``a`` and ``b`` live in the same memory (both host, or one device)."""
    ma, mb = _memory(a), _memory(b)
    if ma != mb:
        raise ArgumentError(
            f"{name_b}: expected {_memory_name(ma)} like {name_a} (one call's buffers share "
            f"one memory); got {_memory_name(mb)}", MPI.ERR_BUFFER)


def same_dtype(name_a, a, name_b, b):
    """Raise unless ``b`` (argument ``name_b``) has the dtype of ``a`` (argument ``name_a``)."""
    if a.dtype != b.dtype:
        raise ArgumentError(
            f"{name_b}: expected dtype {a.dtype} (the dtype of {name_a}); got {b.dtype}",
            MPI.ERR_TYPE)


def check_no_alias(send_name, send, recv_name, recv):
    """MPI forbids send and receive buffers that overlap (MPI.IN_PLACE is the way)."""
    if send is None or recv is None or not send.nbytes or not recv.nbytes:
        return
    a, b = data_ptr(send), data_ptr(recv)
    if a < b + recv.nbytes and b < a + send.nbytes:
        raise ArgumentError(
            f"{recv_name}: overlaps {send_name} in memory; MPI forbids aliased send and receive "
            f"buffers (pass {send_name}=MPI.IN_PLACE to work in place)", MPI.ERR_BUFFER)


def check_size(argname, arr, expected, how):
    """Raise unless ``arr`` has ``expected`` elements (``how``: where that number comes from)."""
    if arr.size != expected:
        raise ArgumentError(
            f"{argname}: expected {expected} elements ({how}); got {arr.size}", MPI.ERR_COUNT)


def check_root(root, size, argname="root"):
    """``root`` as an int, checked to be a rank of a communicator of ``size`` ranks."""
    if isinstance(root, (bool, np.bool_)) or not _is_index(root):
        raise ArgumentTypeError(
            f"{argname}: expected an integer rank in [0, {size - 1}]; got {describe(root)}",
            MPI.ERR_ROOT)
    root = operator.index(root)
    if not 0 <= root < size:
        raise ArgumentError(
            f"{argname}: expected a rank in [0, {size - 1}] (communicator size {size}); "
            f"got {root}",
            MPI.ERR_ROOT)
    return root


def _is_index(x):
    try:
        operator.index(x)
        return True
    except TypeError:
        return False


def check_counts(argname, counts, size):
    """A sequence of ``size`` non-negative integers -> list of int."""
    try:
        seq = list(counts)
    except TypeError:
        raise ArgumentTypeError(
            f"{argname}: expected a sequence of {size} non-negative integers; "
            f"got {describe(counts)}",
            MPI.ERR_COUNT) from None
    if len(seq) != size:
        raise ArgumentError(
            f"{argname}: expected {size} counts (one per rank); got {len(seq)}", MPI.ERR_COUNT)
    out = []
    for i, c in enumerate(seq):
        if isinstance(c, (bool, np.bool_)) or not _is_index(c) or operator.index(c) < 0:
            raise ArgumentError(
                f"{argname}[{i}]: expected a non-negative integer; got {describe(c)}",
                MPI.ERR_COUNT)
        out.append(operator.index(c))
    return out


def is_in_place(buf):
    """True for ``MPI.IN_PLACE``."""
    return buf is IN_PLACE


def not_in_place(argname, where):
    """The error for ``MPI.IN_PLACE`` where MPI does not allow it (``where`` says where it is)."""
    return ArgumentError(f"{argname}: MPI.IN_PLACE is only valid {where}", MPI.ERR_BUFFER)


def whole_blocks(argname, flat, n):
    """Elements per block of ``flat``, which must hold ``n`` equal blocks (one per rank)."""
    if flat.size % n:
        raise ArgumentError(
            f"{argname}: expected a multiple of {n} elements (one block per rank); "
            f"got {flat.size}", MPI.ERR_COUNT)
    return flat.size // n


def recv_array(argname, recvbuf, send, expected, how, alloc_shape):
    """The receive buffer for ``send`` (a flat sendbuf).

    Allocated when None, else checked for dtype, size (``expected`` elements) and overlap
    with ``send``.

    Returns (the object to hand back to the caller, its flat view).
    """
    if recvbuf is None:
        out = empty(send, alloc_shape)
        return out, out.reshape(-1)
    flat = as_array(argname, recvbuf, writable=True)
    same_memory("sendbuf", send, argname, flat)
    if flat.dtype != send.dtype:
        raise ArgumentError(
            f"{argname}: expected dtype {send.dtype} (the dtype of sendbuf); got {flat.dtype}",
            MPI.ERR_TYPE)
    check_size(argname, flat, expected, how)
    check_no_alias("sendbuf", send, argname, flat)
    return recvbuf, flat


def snapshot(a):
    """A copy of ``a`` for an in-place call, and the (dst, src) pair that refreshes it.

    Blocking and nonblocking calls copy once, now; a persistent request
    copies again at every ``Start`` (the input is whatever is in the buffer then).
    """
    copy = empty(a, a.shape)
    copy[...] = a
    return copy, (copy, a)

