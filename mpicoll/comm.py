"""``P2PComm``: a drop-in ``mpi4py.MPI.Intracomm`` whose collectives are mpicoll's.

::

    from mpi4py import MPI
    import mpicoll
    comm = mpicoll.P2PComm(MPI.COMM_WORLD, allreduce="ring", bcast="pipeline")
    comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)   # runs allreduce_ring
    comm.Send(...), comm.Split(...)                # the wrapped communicator's own

Bcast, Reduce, Allreduce, Gather, Allgather, Scatter, Reduce_scatter_block,
Reduce_scatter, Alltoall and Barrier accept mpi4py's buffer forms (``buf``,
``[buf, datatype]``, ``[buf, count]``, ``[buf, count, datatype]``,
``[buf, (count, displ), datatype]``, ``MPI.IN_PLACE`` or None where MPI allows
in-place), for predefined datatypes. Errors are :class:`mpicoll.ArgumentError`,
an ``MPI.Exception`` with MPI's error class.
"""
import operator

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from . import collectives as _c
from ._buffers import is_device
from ._call import Call
from ._errors import ArgumentError, ArgumentTypeError, describe
from ._comm_v import VMethods
from ._registry import PRIMITIVES, lookup

__all__ = ["P2PComm"]


def _faces(name, primitive, impl):
    """The blocking method ``name``, its nonblocking ``I<name>`` and persistent ``<name>_init``.

    ``impl(self, call, *args)`` parses and runs one call; the faces differ
    only in the kind of :class:`Call` they make and in what they return
    (nothing, or the :class:`mpicoll.Request`).
    """
    def blocking(self, *args, **kwargs):
        impl(self, Call(primitive, self), *args, **kwargs)

    def start(self, *args, **kwargs):
        call = Call(primitive, self, "start")
        impl(self, call, *args, **kwargs)
        return call.request

    def init(self, *args, info=None, **kwargs):   # info: accepted and ignored, as MPI allows
        call = Call(primitive, self, "init")
        impl(self, call, *args, **kwargs)
        return call.request

    inames = ("I" + name.lower(), name + "_init")
    blocking.__name__ = blocking.__qualname__ = name
    start.__name__ = start.__qualname__ = inames[0]
    init.__name__ = init.__qualname__ = inames[1]
    blocking.__doc__ = f"mpi4py's ``{name}``, run by mpicoll's {primitive} algorithm."
    start.__doc__ = (f"Nonblocking ``{name}``: returns an :class:`mpicoll.Request` "
                     f"(``Wait()``/``Test()``, or ``mpicoll.waitall``).")
    init.__doc__ = (f"Persistent ``{name}``: returns an :class:`mpicoll.PersistentRequest`; "
                    f"``Start()`` then ``Wait()``, as often as needed.")
    return blocking, start, init


def _to_dtype(argname, datatype):
    if isinstance(datatype, str):
        try:
            datatype = MPI.Datatype.fromcode(datatype)
        except (ValueError, KeyError):
            raise ArgumentTypeError(f"{argname}: unknown datatype code {datatype!r}") from None
    if not isinstance(datatype, MPI.Datatype) or datatype == MPI.DATATYPE_NULL:
        raise ArgumentTypeError(
            f"{argname}: expected an MPI datatype (e.g. MPI.DOUBLE); got {describe(datatype)}")
    if not datatype.is_predefined:
        raise ArgumentError(
            f"{argname}: mpicoll supports predefined MPI datatypes; got a derived datatype "
            f"({datatype.Get_name() or 'unnamed'})", MPI.ERR_TYPE)
    try:
        return dtlib.to_numpy_dtype(datatype)
    except (ValueError, KeyError, TypeError):
        raise ArgumentError(
            f"{argname}: datatype {datatype.Get_name()} has no NumPy equivalent", MPI.ERR_TYPE) from None


def _base_array(argname, buf):
    if isinstance(buf, np.ndarray) or is_device(buf):
        return buf
    try:
        mem = memoryview(buf)
    except TypeError:
        raise ArgumentTypeError(
            f"{argname}: expected a buffer (NumPy array, bytearray, array.array, ...) or an "
            f"mpi4py buffer specification [buf, count, datatype]; got {describe(buf)}") from None
    try:
        return np.frombuffer(mem, dtype=np.dtype(mem.format)) if mem.format else np.frombuffer(mem, np.uint8)
    except (ValueError, TypeError):
        return np.frombuffer(mem, np.uint8)


def _index(argname, value):
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{argname}: expected a non-negative integer count; got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise ArgumentTypeError(
            f"{argname}: expected a non-negative integer count; got {describe(value)}") from None
    if value < 0:
        raise ArgumentError(f"{argname}: expected a non-negative count; got {value}", MPI.ERR_COUNT)
    return value


def _is_rank(root, rank):
    """``root == rank`` for any integer type (np.int64 included); False for junk."""
    if isinstance(root, (bool, np.bool_)):
        return False
    try:
        return operator.index(root) == rank
    except TypeError:
        return False


def parse_bufspec(argname, spec, *, blocks=1):
    """mpi4py buffer specification -> flat NumPy or CuPy array (or MPI.IN_PLACE).

    ``blocks``: for BufSpecB arguments (Gather's recvbuf, Scatter's sendbuf)
    a given count is per rank, so ``count * blocks`` elements are used.
    """
    if spec is None or spec is MPI.IN_PLACE:
        return MPI.IN_PLACE
    count = displ = datatype = None
    if isinstance(spec, (list, tuple)):
        items = list(spec)
        if len(items) == 2:
            buf, second = items
            if isinstance(second, (MPI.Datatype, str)):
                datatype = second
            else:
                count = second
        elif len(items) == 3:
            buf, count, datatype = items
        else:
            raise ArgumentTypeError(
                f"{argname}: expected buf, [buf, datatype], [buf, count], [buf, count, datatype] "
                f"or [buf, (count, displ), datatype]; got a {type(spec).__name__} of {len(items)} items "
                f"(vector forms belong to the v-collectives)")
        if isinstance(count, (list, tuple)):
            if len(count) != 2:
                raise ArgumentTypeError(f"{argname}: expected count or (count, displ); got {count!r}")
            count, displ = count
    else:
        buf = spec
    base = _base_array(argname, buf)
    # Device (CuPy) arrays take the same path: reshape, view and slices are
    # views in device memory.
    if base.flags.c_contiguous:
        flat = base.reshape(-1)
    elif base.flags.f_contiguous:
        flat = base.T.reshape(-1)      # a view in memory order: what MPI sends
    else:
        return base    # as_array reports it
    if datatype is not None:
        dtype = _to_dtype(argname, datatype)
        if dtype != flat.dtype:
            if flat.nbytes % dtype.itemsize:
                raise ArgumentError(
                    f"{argname}: buffer of {flat.nbytes} bytes is not a whole number of "
                    f"{datatype.Get_name() if isinstance(datatype, MPI.Datatype) else datatype} "
                    f"elements", MPI.ERR_BUFFER)
            flat = flat.view(np.uint8).view(dtype)
    start = 0 if displ is None else _index(f"{argname} displacement", displ)
    if count is not None:
        n = _index(f"{argname} count", count) * blocks
        if start + n > flat.size:
            raise ArgumentError(
                f"{argname}: count {n} (from displacement {start}) exceeds the buffer's "
                f"{flat.size} elements", MPI.ERR_TRUNCATE)
        flat = flat[start:start + n]
    elif start:
        flat = flat[start:]
    return flat


class P2PComm(MPI.Intracomm, VMethods):
    """An ``MPI.Intracomm`` whose collectives run mpicoll's hand-written algorithms.

    ``P2PComm(comm, **choices)`` shares ``comm``'s handle (nothing is
    duplicated or freed); ``choices`` maps primitive names to algorithm
    names, e.g. ``allreduce="ring"``; unnamed primitives use
    ``MPICOLL_<PRIMITIVE>_ALGORITHM`` or ``auto``. ``Dup()`` and ``Clone()``
    keep the choices.
    """

    def __new__(cls, comm=None, *args, **kwargs):
        if comm is not None and not isinstance(comm, MPI.Intracomm):
            raise ArgumentTypeError(
                f"comm: expected an mpi4py.MPI.Intracomm; got {describe(comm)}", MPI.ERR_COMM)
        return super().__new__(cls, comm)

    def __init__(self, comm=None, **choices):
        if comm is not None and not isinstance(comm, MPI.Intracomm):
            raise ArgumentTypeError(
                f"comm: expected an mpi4py.MPI.Intracomm; got {describe(comm)}", MPI.ERR_COMM)
        for prim, name in choices.items():
            if prim not in PRIMITIVES:
                raise ArgumentError(
                    f"{prim}: not a primitive; expected keywords among {', '.join(PRIMITIVES)}")
            if name != "auto":
                lookup(prim, name)
        self._choices = dict(choices)

    @property
    def choices(self):
        """The algorithm chosen per primitive (a copy)."""
        return dict(getattr(self, "_choices", {}))

    def _algo(self, primitive):
        return getattr(self, "_choices", {}).get(primitive)

    def Dup(self, info=None):
        new = super().Dup(info) if info is not None else super().Dup()
        new._choices = self.choices
        return new

    def Clone(self):
        new = super().Clone()
        new._choices = self.choices
        return new

    # -- collectives -------------------------------------------------------
    def _bcast(self, call, buf, root=0):
        _c._bcast(call, lambda: (parse_bufspec("buf", buf),), root,
                  self._algo("bcast"))

    def _reduce(self, call, sendbuf, recvbuf, op=MPI.SUM, root=0):
        def bufs():
            s = parse_bufspec("sendbuf", sendbuf)
            is_root = _is_rank(root, self.Get_rank())
            r = parse_bufspec("recvbuf", recvbuf) if is_root else None
            return s, r
        _c._reduce(call, bufs, op, root, self._algo("reduce"))

    def _allreduce(self, call, sendbuf, recvbuf, op=MPI.SUM):
        def bufs():
            s = parse_bufspec("sendbuf", sendbuf)
            r = parse_bufspec("recvbuf", recvbuf)
            if r is MPI.IN_PLACE:
                raise ArgumentError("recvbuf: expected a buffer; got MPI.IN_PLACE", MPI.ERR_BUFFER)
            return s, r
        _c._allreduce(call, bufs, op, self._algo("allreduce"))

    def _gather(self, call, sendbuf, recvbuf, root=0):
        n = self.Get_size()

        def bufs():
            s = parse_bufspec("sendbuf", sendbuf)
            is_root = _is_rank(root, self.Get_rank())
            r = parse_bufspec("recvbuf", recvbuf, blocks=n) if is_root else None
            return s, r
        _c._gather(call, bufs, root, self._algo("gather"))

    def _allgather(self, call, sendbuf, recvbuf):
        n = self.Get_size()
        _c._allgather(call,
                      lambda: (parse_bufspec("sendbuf", sendbuf),
                               parse_bufspec("recvbuf", recvbuf, blocks=n)),
                      self._algo("allgather"))

    def _scatter(self, call, sendbuf, recvbuf, root=0):
        n = self.Get_size()

        def bufs():
            is_root = _is_rank(root, self.Get_rank())
            s = parse_bufspec("sendbuf", sendbuf, blocks=n) if is_root else None
            r = parse_bufspec("recvbuf", recvbuf)
            if r is MPI.IN_PLACE and not is_root:
                r = None
            return s, r
        _c._scatter(call, bufs, root, self._algo("scatter"))

    def _reduce_scatter_block(self, call, sendbuf, recvbuf, op=MPI.SUM):
        def bufs():
            # mpi4py: counts in these specs are per block; in place, recvbuf
            # holds all N blocks of input.
            n = self.Get_size()
            s = parse_bufspec("sendbuf", sendbuf, blocks=n)
            r = parse_bufspec("recvbuf", recvbuf, blocks=n if s is MPI.IN_PLACE else 1)
            return s, r
        _c._reduce_scatter(call, bufs, None, op,
                           self._algo("reduce_scatter"))

    def _reduce_scatter(self, call, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM):
        if recvcounts is None:
            # mpi4py's rule: each rank's receive count comes from its recvbuf.
            # Exchanged through the agreement step, so a bad recvbuf on one rank
            # (or another collective called meanwhile) raises on every rank.
            mine = -1
            with call.checking():
                r = parse_bufspec("recvbuf", recvbuf)
                if not (isinstance(r, np.ndarray) or is_device(r)):
                    raise ArgumentError(
                        "recvcounts: None needs a sized recvbuf on every rank to take counts "
                        "from; pass recvcounts explicitly", MPI.ERR_COUNT)
                mine = r.size
            recvcounts = call.exchange(mine)

        def bufs():
            s = parse_bufspec("sendbuf", sendbuf)
            r = parse_bufspec("recvbuf", recvbuf)
            return s, r
        _c._reduce_scatter(call, bufs, recvcounts, op, self._algo("reduce_scatter"))

    def _alltoall(self, call, sendbuf, recvbuf):
        n = self.Get_size()
        _c._alltoall(call,
                     lambda: (parse_bufspec("sendbuf", sendbuf, blocks=n),
                              parse_bufspec("recvbuf", recvbuf, blocks=n)),
                     self._algo("alltoall"))

    def _barrier(self, call):
        _c._barrier(call, self._algo("barrier"))

    # Blocking, nonblocking (I...) and persistent (..._init) faces of each.
    Bcast, Ibcast, Bcast_init = _faces('Bcast', 'bcast', _bcast)
    Reduce, Ireduce, Reduce_init = _faces('Reduce', 'reduce', _reduce)
    Allreduce, Iallreduce, Allreduce_init = _faces('Allreduce', 'allreduce', _allreduce)
    Gather, Igather, Gather_init = _faces('Gather', 'gather', _gather)
    Allgather, Iallgather, Allgather_init = _faces('Allgather', 'allgather', _allgather)
    Scatter, Iscatter, Scatter_init = _faces('Scatter', 'scatter', _scatter)
    (Reduce_scatter_block, Ireduce_scatter_block,
     Reduce_scatter_block_init) = _faces('Reduce_scatter_block', 'reduce_scatter',
                                         _reduce_scatter_block)
    Reduce_scatter, Ireduce_scatter, Reduce_scatter_init = _faces('Reduce_scatter', 'reduce_scatter', _reduce_scatter)
    Alltoall, Ialltoall, Alltoall_init = _faces('Alltoall', 'alltoall', _alltoall)
    Barrier, Ibarrier, Barrier_init = _faces('Barrier', 'barrier', _barrier)

    # The v-collectives and scans (parsing in mpicoll._comm_v, which gets
    # parse_bufspec from here: it cannot import this module).
    _bufspec = staticmethod(parse_bufspec)
    Gatherv, Igatherv, Gatherv_init = _faces('Gatherv', 'gatherv', VMethods._gatherv)
    Scatterv, Iscatterv, Scatterv_init = _faces('Scatterv', 'scatterv', VMethods._scatterv)
    Allgatherv, Iallgatherv, Allgatherv_init = _faces('Allgatherv', 'allgatherv',
                                                      VMethods._allgatherv)
    Alltoallv, Ialltoallv, Alltoallv_init = _faces('Alltoallv', 'alltoallv', VMethods._alltoallv)
    Scan, Iscan, Scan_init = _faces('Scan', 'scan', VMethods._scan)
    Exscan, Iexscan, Exscan_init = _faces('Exscan', 'exscan', VMethods._exscan)
