"""mpi4py's buffer forms as ``P2PComm`` takes them: ``buf``, ``[buf, count, datatype]``, ...

:func:`parse_bufspec` turns one message spec (``buf``, ``[buf, datatype]``,
``[buf, count]``, ``[buf, count, datatype]``, ``[buf, (count, displ), datatype]``,
``[buf, count, displ, datatype]``, ``[None, datatype]`` for an empty message,
``MPI.IN_PLACE`` or None) into a flat NumPy or CuPy array; :func:`parse_vec`
does the same for a v-buffer spec. ``buf`` is any object mpi4py takes (the
buffer protocol, DLPack, ``__cuda_array_interface__``: :mod:`.protocols`,
viewed, never copied). Derived datatypes go to the call's
:class:`~.datatypes.Boundary`, which packs and unpacks them around the call.
Every error is an :class:`mpicoll.ArgumentError` naming the argument.
"""
import operator
from functools import partial

import numpy as np
from mpi4py import MPI

from ..core.errors import ArgumentError, ArgumentTypeError, describe, non_negative
from .datatypes import is_derived, type_info
from .protocols import as_base_array
from .vbuffers import VSpec, from_code, numpy_dtype, parse_vspec, retyped

__all__ = ["parse_bufspec", "parse_vec", "recv_spec", "is_rank", "missing", "required", "role",
           "reduction_bufs"]


def _as_datatype(argname, datatype):
    """A datatype argument (an ``MPI.Datatype`` or a type code such as ``'d'``) -> MPI.Datatype."""
    datatype = from_code(argname, datatype)
    if not isinstance(datatype, MPI.Datatype) or datatype == MPI.DATATYPE_NULL:
        raise ArgumentTypeError(
            f"{argname}: expected an MPI datatype (e.g. MPI.DOUBLE); got {describe(datatype)}")
    return datatype


_index = non_negative   # one rule for counts and displacements (mpicoll.core.errors)


def is_rank(root, rank):
    """``root == rank`` for any integer type (np.int64 included); False for junk."""
    if isinstance(root, (bool, np.bool_)):
        return False
    try:
        return operator.index(root) == rank
    except TypeError:
        return False


_FORMS = ("buf, [buf, datatype], [buf, count], [buf, (count, displ)], [buf, count, datatype], "
          "[buf, (count, displ), datatype] or [buf, count, displ, datatype]")


def _split(argname, spec):
    """mpi4py's forms of one message -> (buf, count, displ, datatype), missing parts None."""
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    items = list(spec)
    count = displ = datatype = None
    if len(items) == 2:
        buf, second = items
        if isinstance(second, (MPI.Datatype, str)):
            datatype = second
        else:
            count = second
    elif len(items) == 3:
        buf, count, datatype = items
    elif len(items) == 4:
        buf, count, displ, datatype = items
        if not isinstance(datatype, (MPI.Datatype, str)) and datatype is not None:
            raise ArgumentTypeError(
                f"{argname}: expected an MPI datatype as the last item of a {type(spec).__name__} "
                f"of 4 items ([buf, count, displ, datatype]); got {describe(datatype)}")
    else:
        raise ArgumentTypeError(
            f"{argname}: expected {_FORMS}; got a {type(spec).__name__} of {len(items)} items "
            f"(vector forms belong to the v-collectives)")
    if isinstance(count, (list, tuple)):
        if len(count) != 2 or displ is not None:
            raise ArgumentTypeError(f"{argname}: expected count or (count, displ); got {count!r}")
        count, displ = count
    return buf, count, displ, datatype


def _no_buffer(argname, buf, count, displ, datatype, bnd):
    """``[None, datatype]`` (or MPI.BOTTOM), no count or 0: an empty message, as in mpi4py."""
    what = "None" if buf is None else "MPI.BOTTOM"
    if datatype is None:
        raise ArgumentTypeError(
            f"{argname}: [{what}, ...] describes an empty message and needs its MPI datatype "
            f"([{what}, MPI.INT] or [{what}, 0, MPI.INT]); got no datatype")
    n = 0 if count is None else _index(f"{argname} count", count)
    if n:
        why = (" (absolute addresses from MPI.BOTTOM are not supported: mpicoll cannot "
               "check or read them)") if buf is not None else ""
        raise ArgumentError(f"{argname}: buffer is {what} but count is {n}; {what} only "
                            f"describes an empty message{why}", MPI.ERR_BUFFER)
    if displ is not None and _index(f"{argname} displacement", displ):
        raise ArgumentError(f"{argname}: displacement {displ} is beyond an empty ({what}) buffer",
                            MPI.ERR_BUFFER)
    if is_derived(datatype):
        info = type_info(argname, datatype)
        if bnd is not None:
            bnd.types[argname] = info
        return np.empty(0, info.elem)
    return np.empty(0, numpy_dtype(argname, datatype))


def parse_bufspec(argname, spec, *, blocks=1, bnd=None, role="send"):
    """mpi4py buffer specification -> flat NumPy or CuPy array (or MPI.IN_PLACE).

    ``blocks``: for BufSpecB arguments (Gather's recvbuf, Scatter's sendbuf)
    a given count is per rank, so ``count * blocks`` elements are used.
    ``bnd``: the call's :class:`mpicoll.args.datatypes.Boundary`, which takes
    derived datatypes (packed or viewed there; ``role`` says whether the
    buffer is read, written, or both) and records each datatype given;
    without it derived datatypes are refused.
    """
    if spec is None or spec is MPI.IN_PLACE:
        return MPI.IN_PLACE
    buf, count, displ, datatype = _split(argname, spec)
    if datatype is not None:
        datatype = _as_datatype(argname, datatype)
    if bnd is not None:
        bnd.given[argname] = datatype
    if buf is None or buf is MPI.BOTTOM:
        return _no_buffer(argname, buf, count, displ, datatype, bnd)
    base = as_base_array(argname, buf)
    if is_derived(datatype):
        if bnd is None:
            raise ArgumentError(
                f"{argname}: derived datatypes are taken by P2PComm's methods, not here; got "
                f"{datatype.Get_name() or 'a derived datatype'}", MPI.ERR_TYPE)
        return bnd.simple(argname, base, count, displ, datatype, blocks, role)
    # Device (CuPy) arrays take the same path: reshape, view and slices are
    # views in device memory.
    if base.flags.c_contiguous:
        flat = base.reshape(-1)
    elif base.flags.f_contiguous:
        flat = base.T.reshape(-1)      # a view in memory order: what MPI sends
    else:
        return base    # as_array reports it
    if datatype is not None:
        flat = retyped(argname, flat, numpy_dtype(argname, datatype), datatype.Get_name())
    start = 0 if displ is None else _index(f"{argname} displacement", displ)
    if count is not None:
        n = _index(f"{argname} count", count) * blocks
        if start + n > flat.size:
            raise ArgumentError(
                f"{argname}: count {n} (from displacement {start}) exceeds the buffer's "
                f"{flat.size} elements", MPI.ERR_TRUNCATE)
        flat = flat[start:start + n]
    elif start:
        if start > flat.size:
            raise ArgumentError(
                f"{argname}: displacement {start} is beyond the buffer's {flat.size} elements",
                MPI.ERR_TRUNCATE)
        flat = flat[start:]
    return flat


def missing(argname, given):
    """mpi4py has no allocating form: a receive (or Bcast) buffer must be given."""
    what = "None" if given is None else "MPI.IN_PLACE"
    return ArgumentTypeError(
        f"{argname}: expected a buffer (NumPy array, bytearray, array.array, DLPack or "
        f"CUDA-array-interface object) or [buf, count, datatype] ([None, datatype] for an "
        f"empty message); got {what}", MPI.ERR_BUFFER)


def recv_spec(argname, spec, sendbuf, bnd, blocks=1):
    """A receive buffer that must be given; read too (``inout``) when sendbuf is in place."""
    r = parse_bufspec(argname, spec, blocks=blocks, bnd=bnd,
                      role="inout" if sendbuf is MPI.IN_PLACE else "recv")
    if r is MPI.IN_PLACE:
        raise missing(argname, spec)
    return r


def required(argname, spec):
    """mpi4py has no allocating form: a missing receive buffer is an error, not a request."""
    if spec is None:
        raise ArgumentError(f"{argname}: expected a buffer; got None", MPI.ERR_BUFFER)
    return spec


def role(sendbuf):
    """A receive buffer is also read when the send buffer is MPI.IN_PLACE."""
    return "inout" if sendbuf is MPI.IN_PLACE else "recv"


def parse_vec(argname, spec, bnd, how, size):
    """A v-buffer spec -> :class:`~.vbuffers.VSpec` over ``size`` ranks.

    A derived datatype is packed or viewed by ``bnd`` (``how``: send, recv or inout).
    """
    def derived(argname, buf, counts, displs, datatype):
        bnd.given[argname] = datatype
        if buf is None or buf is MPI.BOTTOM:
            base = np.empty(0, np.uint8)        # counts must then all be 0 (checked there)
        else:
            base = as_base_array(argname, buf)
        flat, fcounts, fdispls = bnd.vector(argname, base, counts, displs, datatype, size, how)
        return VSpec(buf, flat, fcounts, fdispls)
    return parse_vspec(argname, spec, bufspec=partial(parse_bufspec, bnd=bnd, role=how),
                       derived=derived)


def reduction_bufs(bnd, sendbuf, recvbuf, op, keep):
    """(send, recv) of a reduction in mpi4py's forms (Scan, Exscan).

    ``keep``: recvbuf is read too (its old contents stay where MPI leaves the result
    undefined).
    """
    s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
    r = parse_bufspec("recvbuf", recvbuf, bnd=bnd, role="inout" if keep else role(s))
    if r is MPI.IN_PLACE:
        raise ArgumentError(f"recvbuf: expected a buffer; got "
                            f"{'None' if recvbuf is None else 'MPI.IN_PLACE'}", MPI.ERR_BUFFER)
    return bnd.reduction(op, s, r)
