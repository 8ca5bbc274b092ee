"""Vector buffer specifications (the v side of Gatherv, Scatterv, Allgatherv, Alltoallv).

mpi4py's forms, all accepted by the functional API and by ``P2PComm``::

    buf                                 counts split evenly (as mpi4py splits them)
    [buf, counts]                       displacements back to back
    [buf, (counts, displs)]
    [buf, counts, displs]               (mpi4py 3's order; a third item that is not a datatype)
    [buf, counts, datatype]             counts may be (counts, displs)
    [buf, (counts, displs), datatype]
    [buf, counts, displs, datatype]

``counts`` is one count per rank or a single integer for all of them;
``displs`` one displacement per rank (in elements of the buffer's dtype),
or a single integer d meaning i·d, or None for back-to-back blocks.
Parsing (:func:`parse_vspec`) only splits the form; :func:`layout` checks
counts and displacements against the buffer and the communicator size.
Every error is an :class:`ArgumentError` naming the argument. No messages.
"""

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from ..core.blocks import offsets, split
from ..core.errors import ArgumentError, ArgumentTypeError, describe, non_negative
from .buffers import is_device

__all__ = ["VSpec", "parse_vspec", "layout", "per_rank", "from_code", "numpy_dtype",
           "retyped"]

_FORMS = ("buf, [buf, counts], [buf, (counts, displs)], [buf, counts, displs], "
          "[buf, counts, datatype], [buf, (counts, displs), datatype] or "
          "[buf, counts, displs, datatype]")


class VSpec:
    """A parsed v-buffer: the user's buffer, a flat view of it, counts and displs as given."""

    __slots__ = ("obj", "flat", "counts", "displs")

    def __init__(self, obj, flat, counts, displs):
        self.obj, self.flat, self.counts, self.displs = obj, flat, counts, displs


def _is_datatype(x):
    return isinstance(x, (MPI.Datatype, str))


def parse_vspec(argname, spec, *, bufspec=None, derived=None):
    """An mpi4py v-buffer spec -> :class:`VSpec`; MPI.IN_PLACE and None pass through.

    ``bufspec``: ``P2PComm``'s :func:`mpicoll.comm.parse_bufspec`, handed in
    (importing it would make comm and this module import each other): any
    object exposing the buffer protocol is then accepted (bytearray,
    array.array, ...), viewed through the datatype, as mpi4py does. Without
    it the buffer must be a NumPy or CuPy array (the functional API), checked
    later with the other arrays.

    ``derived``: ``P2PComm``'s handler of a derived datatype,
    ``derived(argname, buf, counts, displs, datatype) -> VSpec`` (counts and
    displacements as given, in entries and extents of the datatype); without
    it derived datatypes are refused.
    """
    if spec is None or spec is MPI.IN_PLACE or isinstance(spec, VSpec):
        return spec
    counts = displs = datatype = None
    if isinstance(spec, (list, tuple)):
        items = list(spec)
        if len(items) == 2:
            buf, second = items
            if _is_datatype(second):
                datatype = second
            else:
                counts = second
        elif len(items) == 3:
            buf, counts, third = items
            if third is None or _is_datatype(third):
                datatype = third
            else:
                displs = third
        elif len(items) == 4:
            buf, counts, displs, datatype = items
        else:
            raise ArgumentTypeError(
                f"{argname}: expected {_FORMS}; got a {type(spec).__name__} of {len(items)} items")
        if isinstance(counts, tuple):
            if len(counts) != 2 or displs is not None:
                raise ArgumentTypeError(
                    f"{argname}: expected (counts, displs) as the second item; got a tuple of "
                    f"{len(counts)} items"
                    + (" and displacements again" if displs is not None else ""))
            counts, displs = counts
    else:
        buf = spec
    user = buf
    if derived is not None and isinstance(datatype, MPI.Datatype) and \
            datatype != MPI.DATATYPE_NULL and not datatype.is_predefined:
        return derived(argname, buf, counts, displs, datatype)
    if bufspec is not None:
        # The whole buffer, typed by the datatype: counts and displs apply to it.
        flat = bufspec(argname, buf if datatype is None else [buf, datatype])
        if flat is MPI.IN_PLACE:
            raise ArgumentTypeError(f"{argname}: expected a buffer as the first item; got None")
        return VSpec(user, flat, counts, displs)
    if not (isinstance(buf, np.ndarray) or is_device(buf)):
        raise ArgumentTypeError(
            f"{argname}: expected a NumPy or CuPy array (alone or as the first item of "
            f"{_FORMS}); got {describe(buf)}")
    flat = buf.reshape(-1) if buf.flags.c_contiguous else buf     # else as_array reports it
    if datatype is not None and flat.ndim == 1:
        dtype = _to_dtype(argname, datatype)
        flat = retyped(argname, flat, dtype, dtype)
    return VSpec(user, flat, counts, displs)


def retyped(argname, flat, dtype, name):
    """The 1-D array ``flat`` viewed as ``dtype`` (``name``: the type in the error)."""
    if dtype != flat.dtype:
        if flat.nbytes % dtype.itemsize:
            raise ArgumentError(
                f"{argname}: buffer of {flat.nbytes} bytes is not a whole number of "
                f"{name} elements", MPI.ERR_BUFFER)
        flat = flat.view(np.uint8).view(dtype)
    return flat


def from_code(argname, datatype):
    """A type code such as ``'d'`` -> its MPI datatype; anything else is returned as given."""
    if isinstance(datatype, str):
        try:
            return MPI.Datatype.fromcode(datatype)
        except (ValueError, KeyError):
            raise ArgumentTypeError(f"{argname}: unknown datatype code {datatype!r}") from None
    return datatype


def numpy_dtype(argname, datatype):
    """A predefined MPI datatype -> its NumPy dtype (an error naming it where none is)."""
    try:
        return dtlib.to_numpy_dtype(datatype)
    except (ValueError, KeyError, TypeError):
        raise ArgumentError(f"{argname}: datatype {datatype.Get_name()} has no NumPy "
                            f"equivalent", MPI.ERR_TYPE) from None


def _to_dtype(argname, datatype):
    """A predefined MPI datatype (or its type code) -> NumPy dtype."""
    datatype = from_code(argname, datatype)
    if not isinstance(datatype, MPI.Datatype):
        raise ArgumentTypeError(
            f"{argname}: expected an MPI datatype (e.g. MPI.DOUBLE) as the last item; got "
            f"{describe(datatype)}")
    if datatype == MPI.DATATYPE_NULL or not datatype.is_predefined:
        raise ArgumentError(f"{argname}: expected a predefined MPI datatype; got "
                            f"{datatype.Get_name() or 'a derived datatype'}", MPI.ERR_TYPE)
    return numpy_dtype(argname, datatype)


_index = non_negative   # mpicoll.core.errors: one rule for counts and displacements


def per_rank(argname, values, size, what, check=non_negative):
    """One integer per rank -> list of int, each passed through ``check(name, value, what)``.

    ``values``: a sequence (or array) of ``size`` integers; ``what`` names one ("count").
    """
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ArgumentTypeError(
            f"{argname}: expected {size} {what}s (one per rank) or one integer for all; "
            f"got {describe(values)}", MPI.ERR_COUNT)
    seq = list(values.tolist() if hasattr(values, "tolist") else values)
    if len(seq) != size:
        raise ArgumentError(
            f"{argname}: expected {size} {what}s (one per rank); got {len(seq)}", MPI.ERR_COUNT)
    return [check(f"{argname}[{i}]", v, what) for i, v in enumerate(seq)]


def layout(argname, vspec, size, *, receive):
    """Counts and displacements of a :class:`VSpec` on ``size`` ranks: (counts, displs) lists.

    Checks: one count and displacement per rank, none negative, every
    non-empty block inside the buffer; ``receive``: no two non-empty blocks
    overlap (MPI forbids overlapping receive regions; send blocks may).
    """
    flat, counts, displs = vspec.flat, vspec.counts, vspec.displs
    if counts is None:
        counts = split(flat.size, size)       # mpi4py: csize // N, the first csize % N one more
    elif isinstance(counts, (int, np.integer)) and not isinstance(counts, (bool, np.bool_)):
        counts = [_index(f"{argname} counts", counts, "count")] * size
    else:
        counts = per_rank(f"{argname} counts", counts, size, "count")
    if displs is None:
        displs = offsets(counts)[:-1]
    elif isinstance(displs, (int, np.integer)) and not isinstance(displs, (bool, np.bool_)):
        d = _index(f"{argname} displs", displs, "displacement")
        displs = [d * i for i in range(size)]
    else:
        displs = per_rank(f"{argname} displs", displs, size, "displacement")
    for i in range(size):
        if counts[i] and displs[i] + counts[i] > flat.size:
            raise ArgumentError(
                f"{argname}: block {i} (displacement {displs[i]}, count {counts[i]}) ends at "
                f"element {displs[i] + counts[i]}, beyond the buffer's {flat.size} elements",
                MPI.ERR_COUNT)
    if receive:
        blocks = sorted((displs[i], i) for i in range(size) if counts[i])
        for (d0, i), (d1, j) in zip(blocks, blocks[1:], strict=False):
            if d0 + counts[i] > d1:
                raise ArgumentError(
                    f"{argname}: the blocks of ranks {min(i, j)} and {max(i, j)} overlap "
                    f"(elements [{displs[min(i, j)]}, {displs[min(i, j)] + counts[min(i, j)]}) "
                    f"and [{displs[max(i, j)]}, {displs[max(i, j)] + counts[max(i, j)]})); "
                    f"MPI forbids overlapping receive blocks", MPI.ERR_BUFFER)
    return counts, displs
