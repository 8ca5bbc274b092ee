"""User-defined ops over derived datatypes, at :class:`mpicoll.P2PComm`'s boundary.

mpicoll's algorithms reduce packed data (:mod:`mpicoll.args.datatypes`). A
predefined op reduces the packed elements as they are. A user-defined op
was written for the datatype the caller gave: MPI calls its function with
memory laid out as that datatype, a count of its entries and the datatype
itself. So, for a user op over a derived datatype:

- the packed data is viewed as whole entries (one NumPy ``void`` element of
  the datatype's size per entry), so the algorithms split, move and reduce
  whole entries, never part of one; a struct of mixed types is fine here
  (unlike predefined ops, which need one element type);
- each local reduction of ``k`` entries unpacks both operands
  (``MPI_Unpack``) into scratch memory laid out as ``k`` entries of the
  datatype, calls the op through ``MPI_Reduce_local`` on ``[scratch, k,
  datatype]`` — the user's function sees what MPI's own collective would
  hand it — and packs the result back (``MPI_Pack``).

Cost beyond the op itself: two unpacks and one pack of ``k`` entries per
local reduction (host memory only: device buffers with a user op over a
derived datatype are refused, as ``MPI_Pack`` reads host memory).
The MPI library's own collective (algorithm ``native``) runs on the packed
data, where it could not call the op with the user's datatype: ``auto``
then picks a hand-written algorithm, and ``native`` named explicitly is an
error (:func:`native_refusal`).
"""
import numpy as np
from mpi4py import MPI

__all__ = ["EntryOp", "wrap", "native_refusal"]


class EntryOp(MPI.Op):
    """A user op (same handle) that, once its call has a derived datatype, reduces packed entries.

    ``entries`` is the call's :class:`mpicoll.args.datatypes.TypeInfo` when the
    reduction runs on packed entries of a derived datatype, else None (the
    op then behaves exactly as the op it wraps).
    """

    def __new__(cls, op, comm):
        """Wrap user op ``op`` (same handle) for calls on ``comm``."""
        self = super().__new__(cls, op)
        self._comm = comm
        self.entries = None
        return self

    def Reduce_local(self, inbuf, inoutbuf):
        """MPI's ``Reduce_local``; packed entries: unpack both buffers, reduce, pack the result."""
        info = self.entries
        if info is None:
            return MPI.Op.Reduce_local(self, inbuf, inoutbuf)
        k = inoutbuf.size
        if k == 0:
            return None
        src, dst = _Scratch(info, k), _Scratch(info, k)
        src.unpack(inbuf, self._comm)
        dst.unpack(inoutbuf, self._comm)
        MPI.Op.Reduce_local(self, src.spec(), dst.spec())
        dst.pack(inoutbuf, self._comm)
        return None


class _Scratch:
    """``k`` entries of a derived datatype laid out as MPI lays them out from one address."""

    __slots__ = ("info", "k", "mem", "addr")

    def __init__(self, info, k):
        pad = max(0, -info.true_lb)               # entry 0 may start before its address
        span = (k - 1) * info.extent + max(info.true_ub, info.extent)
        self.info, self.k = info, k
        self.mem = np.zeros(pad + span, np.uint8)  # zeros: holes hold no stale data
        self.addr = self.mem.ctypes.data + pad

    def _buffer(self, readonly=False):
        return MPI.buffer.fromaddress(self.addr, self.k * self.info.extent, readonly)

    def spec(self):
        return [self._buffer(), self.k, self.info.dt]

    def unpack(self, packed, comm):
        self.info.dt.Unpack(packed.view(np.uint8), 0, self._buffer(), comm)

    def pack(self, packed, comm):
        self.info.dt.Pack(self._buffer(True), packed.view(np.uint8), 0, comm)


def wrap(op, comm):
    """``op`` as an :class:`EntryOp` if it is a user-defined op, else ``op`` itself."""
    if isinstance(op, MPI.Op) and not isinstance(op, EntryOp) and op != MPI.OP_NULL \
            and not op.is_predefined:
        return EntryOp(op, comm)
    return op


def native_refusal(primitive, op):
    """Why algorithm ``native`` cannot run this call (a user op over packed entries), or None."""
    info = getattr(op, "entries", None)
    if info is None:
        return None
    return (f"algorithm: 'native' runs the MPI library's {primitive} on mpicoll's packed data, "
            f"where it cannot call a user-defined op with {info.name}; choose a "
            f"hand-written algorithm (or 'auto'), or call the wrapped communicator itself")
