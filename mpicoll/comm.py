"""``P2PComm``: a drop-in ``mpi4py.MPI.Intracomm`` whose collectives are mpicoll's.

::

    from mpi4py import MPI
    import mpicoll
    comm = mpicoll.P2PComm(MPI.COMM_WORLD, allreduce="ring", bcast="pipeline")
    comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)   # runs allreduce_ring
    comm.Send(...), comm.Split(...)                # the wrapped communicator's own

Overridden, in their blocking, nonblocking (``I...``) and persistent
(``..._init``) faces: Bcast, Reduce, Allreduce, Gather, Allgather, Scatter,
Reduce_scatter_block, Reduce_scatter, Alltoall, Barrier, and (parsed in
:mod:`mpicoll._comm_v`) Gatherv, Scatterv, Allgatherv, Alltoallv, Scan,
Exscan. Everything else — Alltoallw, the neighbourhood collectives, the
lowercase pickle-based methods, point-to-point, communicator management —
is the wrapped communicator's own.

Buffers take every form mpi4py takes (:func:`parse_bufspec`): ``buf``,
``[buf, datatype]``, ``[buf, count]``, ``[buf, count, datatype]``,
``[buf, (count, displ), datatype]``, ``[buf, count, displ, datatype]``,
``[None, datatype]`` (or ``[None, 0, datatype]``) for an empty message,
``MPI.IN_PLACE`` or None where MPI allows in-place; ``buf`` is any object
mpi4py takes — the buffer protocol, DLPack, ``__cuda_array_interface__``
(:mod:`mpicoll.args.protocols`: viewed, never copied, so results land in the
caller's object). Datatypes are predefined or derived; derived ones are
packed and unpacked by MPI at the boundary of the call
(:mod:`mpicoll.args.datatypes`), the algorithms running on the packed elements.
Errors are :class:`mpicoll.ArgumentError`, an ``MPI.Exception`` with MPI's
error class, raised on every rank before any message.
"""
import operator

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from . import collectives as _c
from .args.buffers import check_counts
from .engine import memo as _memo
from .engine.call import Call
from .args.datatypes import Boundary, is_derived, type_info
from .args.user_ops import wrap as _user_op
from .args.protocols import as_base_array
from .core.errors import ArgumentError, ArgumentTypeError, describe, non_negative
from ._comm_v import VMethods
from .core.registry import PRIMITIVES, lookup

__all__ = ["P2PComm"]


def _faces(name, primitive, impl, memo=None):
    """The blocking method ``name``, its nonblocking ``I<name>`` and persistent ``<name>_init``.

    ``impl(self, call, bnd, *args)`` parses and runs one call (``bnd``: its
    :class:`mpicoll.args.datatypes.Boundary`); the faces differ
    only in the kind of :class:`Call` they make and in what they return
    (nothing, or the :class:`mpicoll.Request`).

    ``memo``: (buffer parameter names, ((other parameter, default), ...)) of
    the blocking method, whose repeated calls on NumPy or device arrays (bare,
    or in buffer specs :func:`_memo_args` can compare) then go through
    :mod:`mpicoll.engine.memo` as the functional API's do (a hit replays the bound
    plan after the agreement; a miss runs ``impl`` and is remembered); so do
    the nonblocking method's (the same parameters).
    """
    space = f"P2PComm.{name}"

    def run_blocking(call, _bufs, comm, args, kwargs, _algorithm=None):
        # _memo.run's impl signature: (call, bufs, *args, algorithm)
        bnd = Boundary(comm)
        impl(comm, call, bnd, *args, **kwargs)
        bnd.finish(call)              # derived datatypes: unpacked into the caller's buffers

    def blocking(self, *args, **kwargs):
        bound = None if memo is None else _memo_args(memo, args, kwargs)
        if bound is None:
            run_blocking(Call(primitive, self), None, self, args, kwargs)
        else:
            _memo.run(primitive, run_blocking, self, self._algo(primitive), bound[0], bound[1],
                      (self, args, kwargs), space=space)

    def start(self, *args, **kwargs):
        bound = None if memo is None else _memo_args(memo, args, kwargs)
        if bound is not None:         # arrays the memo keys on: repeated calls replay (_memo.start)
            return _memo.start(primitive, run_blocking, self, self._algo(primitive), bound[0],
                               bound[1], (self, args, kwargs), space=f"P2PComm.I{name}")
        call = Call(primitive, self, "start")
        bnd = Boundary(self)
        impl(self, call, bnd, *args, **kwargs)
        bnd.finish(call)              # ... when the request completes
        return call.request

    def init(self, *args, info=None, **kwargs):   # info: accepted and ignored, as MPI allows
        call = Call(primitive, self, "init")
        bnd = Boundary(self)
        impl(self, call, bnd, *args, **kwargs)
        bnd.finish(call)              # ... packed and unpacked around every Start
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


# Parameter names of the blocking methods, for _memo_args.
_SR, _OP, _SUM = ("sendbuf", "recvbuf"), "op", MPI.SUM


def _memo_args(memo, args, kwargs):
    """(buffers, other arguments) of a blocking call the memo may serve, else None.

    Buffers: NumPy or device arrays, ``MPI.IN_PLACE`` or None, bare or in list
    specs whose other parts are counts, displacements and predefined datatypes
    (:func:`mpicoll.engine.memo.spec_parts`: ``[x, MPI.DOUBLE]``, ``[y, (counts, displs)]``);
    other arguments bound by name without surprises, counts among them compared by
    value. Anything else (a derived datatype, another buffer type, an unknown
    keyword, too many arguments) takes the full path, which parses and reports it.
    """
    names, others = memo
    n = len(names)
    if not kwargs and n <= len(args) <= n + len(others):
        # The common form first (Allreduce(x, y), Bcast(x, 0)): bare arrays, plain values --
        # keyed exactly as the general form below keys them.
        bufs = args[:n]
        if all(map(_memo.array_or_none, bufs)):
            rest = (*args[n:], *[default for _, default in others[len(args) - n:]])
            if not any(type(r) is list or type(r) is tuple or type(r) is np.ndarray
                       for r in rest):
                return bufs, (*rest, *(None,) * n)
    params = list(names) + [p for p, _ in others]
    if len(args) > len(params) or any(k not in params[len(args):] for k in kwargs):
        return None
    given = dict(zip(params, args), **kwargs)
    if any(n not in given for n in names):
        return None
    parts = _memo.spec_parts([given[n] for n in names])
    if parts is None or not all(map(_memo.array_or_none, parts[0])):
        return None
    rest = [given.get(p, default) for p, default in others]
    for i, r in enumerate(rest):
        if type(r) is list or type(r) is tuple or type(r) is np.ndarray:
            rest[i] = _memo.parts_of(r)       # recvcounts: by value
            if rest[i] is None:
                return None
    return parts[0], (*rest, *parts[1])


def _as_datatype(argname, datatype):
    """A datatype argument (an ``MPI.Datatype`` or a type code such as ``'d'``) -> MPI.Datatype."""
    if isinstance(datatype, str):
        try:
            datatype = MPI.Datatype.fromcode(datatype)
        except (ValueError, KeyError):
            raise ArgumentTypeError(f"{argname}: unknown datatype code {datatype!r}") from None
    if not isinstance(datatype, MPI.Datatype) or datatype == MPI.DATATYPE_NULL:
        raise ArgumentTypeError(
            f"{argname}: expected an MPI datatype (e.g. MPI.DOUBLE); got {describe(datatype)}")
    return datatype


def _to_dtype(argname, datatype):
    """A predefined MPI datatype -> its NumPy dtype."""
    try:
        return dtlib.to_numpy_dtype(datatype)
    except (ValueError, KeyError, TypeError):
        raise ArgumentError(
            f"{argname}: datatype {datatype.Get_name()} has no NumPy equivalent", MPI.ERR_TYPE) from None


_index = non_negative   # mpicoll.core.errors: one rule for counts and displacements


def _is_rank(root, rank):
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
    """``[None, datatype]`` (or MPI.BOTTOM) with no count or count 0: an empty message, as in mpi4py."""
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
    return np.empty(0, _to_dtype(argname, datatype))


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
        dtype = _to_dtype(argname, datatype)
        if dtype != flat.dtype:
            if flat.nbytes % dtype.itemsize:
                raise ArgumentError(
                    f"{argname}: buffer of {flat.nbytes} bytes is not a whole number of "
                    f"{datatype.Get_name()} elements", MPI.ERR_BUFFER)
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
        if start > flat.size:
            raise ArgumentError(
                f"{argname}: displacement {start} is beyond the buffer's {flat.size} elements",
                MPI.ERR_TRUNCATE)
        flat = flat[start:]
    return flat


def _missing(argname, given):
    """mpi4py has no allocating form: a receive (or Bcast) buffer must be given."""
    what = "None" if given is None else "MPI.IN_PLACE"
    return ArgumentTypeError(
        f"{argname}: expected a buffer (NumPy array, bytearray, array.array, DLPack or "
        f"CUDA-array-interface object) or [buf, count, datatype] ([None, datatype] for an "
        f"empty message); got {what}", MPI.ERR_BUFFER)


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
    # Each ``_name(self, call, bnd, ...)`` parses mpi4py's arguments inside the
    # core's checking block (``bufs``) and runs the one implementation in
    # mpicoll.collectives; ``bnd`` (mpicoll.args.datatypes.Boundary) holds the
    # derived-datatype conversions, finished by the face (see _faces).
    def _bcast(self, call, bnd, buf, root=0):
        def bufs():
            role = "send" if _is_rank(root, self.Get_rank()) else "recv"
            b = parse_bufspec("buf", buf, bnd=bnd, role=role)
            if b is MPI.IN_PLACE:
                raise _missing("buf", buf)
            return (b,)
        _c._bcast(call, bufs, root, self._algo("bcast"))

    def _recv(self, argname, spec, s, bnd, blocks=1):
        """A receive buffer that must be given; read too (``inout``) when sendbuf is in place."""
        r = parse_bufspec(argname, spec, blocks=blocks, bnd=bnd,
                          role="inout" if s is MPI.IN_PLACE else "recv")
        if r is MPI.IN_PLACE:
            raise _missing(argname, spec)
        return r

    def _reduce(self, call, bnd, sendbuf, recvbuf, op=MPI.SUM, root=0):
        op = _user_op(op, self)      # a user op over a derived datatype: see _user_ops
        def bufs():
            s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
            r = None
            if _is_rank(root, self.Get_rank()):     # elsewhere recvbuf is not looked at (mpi4py)
                r = self._recv("recvbuf", recvbuf, s, bnd)
            return bnd.reduction(op, s, r)
        _c._reduce(call, bufs, op, root, self._algo("reduce"))

    def _allreduce(self, call, bnd, sendbuf, recvbuf, op=MPI.SUM):
        op = _user_op(op, self)      # a user op over a derived datatype: see _user_ops
        def bufs():
            s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
            r = self._recv("recvbuf", recvbuf, s, bnd)
            return bnd.reduction(op, s, r)
        _c._allreduce(call, bufs, op, self._algo("allreduce"))

    def _gather(self, call, bnd, sendbuf, recvbuf, root=0):
        n = self.Get_size()

        def bufs():
            s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
            r = None
            if _is_rank(root, self.Get_rank()):     # elsewhere recvbuf is not looked at (mpi4py)
                r = self._recv("recvbuf", recvbuf, s, bnd, blocks=n)
            return s, r
        _c._gather(call, bufs, root, self._algo("gather"))

    def _allgather(self, call, bnd, sendbuf, recvbuf):
        n = self.Get_size()

        def bufs():
            s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
            return s, self._recv("recvbuf", recvbuf, s, bnd, blocks=n)
        _c._allgather(call, bufs, self._algo("allgather"))

    def _scatter(self, call, bnd, sendbuf, recvbuf, root=0):
        n = self.Get_size()

        def bufs():
            is_root = _is_rank(root, self.Get_rank())
            s = None
            if is_root:                              # elsewhere sendbuf is not looked at (mpi4py)
                s = parse_bufspec("sendbuf", sendbuf, blocks=n, bnd=bnd)
                if s is MPI.IN_PLACE:
                    raise _missing("sendbuf", sendbuf)
            r = parse_bufspec("recvbuf", recvbuf, bnd=bnd, role="recv")
            if r is MPI.IN_PLACE and not is_root:
                r = None          # reported by the core: every rank but the root needs one
            return s, r
        _c._scatter(call, bufs, root, self._algo("scatter"))

    def _reduce_scatter_block(self, call, bnd, sendbuf, recvbuf, op=MPI.SUM):
        op = _user_op(op, self)      # a user op over a derived datatype: see _user_ops
        def bufs():
            # mpi4py: counts in these specs are per block; in place, recvbuf
            # holds all N blocks of input.
            n = self.Get_size()
            s = parse_bufspec("sendbuf", sendbuf, blocks=n, bnd=bnd)
            r = self._recv("recvbuf", recvbuf, s, bnd, blocks=n if s is MPI.IN_PLACE else 1)
            return bnd.reduction(op, s, r)
        _c._reduce_scatter(call, bufs, None, op,
                           self._algo("reduce_scatter"))

    def _reduce_scatter(self, call, bnd, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM):
        op = _user_op(op, self)      # a user op over a derived datatype: see _user_ops
        # The core validates ``counts`` after calling bufs(); bufs() fills it, in
        # flat elements (recvcounts are in entries of the datatype).
        counts, parsed = [], []

        def parse():
            s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
            r = self._recv("recvbuf", recvbuf, s, bnd)
            return bnd.reduction(op, s, r)

        if recvcounts is None:
            # mpi4py's rule: each rank's receive count comes from its recvbuf.
            # Exchanged through the agreement step, so a bad recvbuf on one rank
            # (or another collective called meanwhile) raises on every rank.
            mine = -1
            with call.checking():
                if sendbuf is None or sendbuf is MPI.IN_PLACE:
                    raise ArgumentError(
                        "recvcounts: expected the counts with sendbuf=MPI.IN_PLACE (recvbuf then "
                        "holds the whole input, so it cannot give this rank's count); got None",
                        MPI.ERR_COUNT)
                parsed[:] = parse()
                mine = parsed[1].size
            counts[:] = call.exchange(mine)

        def bufs():
            s, r = parsed if parsed else parse()
            if recvcounts is not None:
                k = bnd.per_entry("recvbuf", "sendbuf")
                counts[:] = [c * k for c in check_counts("recvcounts", recvcounts, self.Get_size())]
            return s, r
        _c._reduce_scatter(call, bufs, counts, op, self._algo("reduce_scatter"))

    def _alltoall(self, call, bnd, sendbuf, recvbuf):
        n = self.Get_size()

        def bufs():
            s = parse_bufspec("sendbuf", sendbuf, blocks=n, bnd=bnd)
            return s, self._recv("recvbuf", recvbuf, s, bnd, blocks=n)
        _c._alltoall(call, bufs, self._algo("alltoall"))

    def _barrier(self, call, bnd):
        _c._barrier(call, self._algo("barrier"))

    # Blocking, nonblocking (I...) and persistent (..._init) faces of each; the memo specs
    # name the blocking method's parameters.
    Bcast, Ibcast, Bcast_init = _faces('Bcast', 'bcast', _bcast, (('buf',), (('root', 0),)))
    Reduce, Ireduce, Reduce_init = _faces('Reduce', 'reduce', _reduce, (_SR, ((_OP, _SUM), ('root', 0))))
    Allreduce, Iallreduce, Allreduce_init = _faces('Allreduce', 'allreduce', _allreduce,
                                                   (_SR, ((_OP, _SUM),)))
    Gather, Igather, Gather_init = _faces('Gather', 'gather', _gather, (_SR, (('root', 0),)))
    Allgather, Iallgather, Allgather_init = _faces('Allgather', 'allgather', _allgather, (_SR, ()))
    Scatter, Iscatter, Scatter_init = _faces('Scatter', 'scatter', _scatter, (_SR, (('root', 0),)))
    (Reduce_scatter_block, Ireduce_scatter_block,
     Reduce_scatter_block_init) = _faces('Reduce_scatter_block', 'reduce_scatter',
                                         _reduce_scatter_block, (_SR, ((_OP, _SUM),)))
    Reduce_scatter, Ireduce_scatter, Reduce_scatter_init = _faces(
        'Reduce_scatter', 'reduce_scatter', _reduce_scatter,
        (_SR, (('recvcounts', None), (_OP, _SUM))))
    Alltoall, Ialltoall, Alltoall_init = _faces('Alltoall', 'alltoall', _alltoall, (_SR, ()))
    Barrier, Ibarrier, Barrier_init = _faces('Barrier', 'barrier', _barrier, ((), ()))

    # The v-collectives and scans (parsing in mpicoll._comm_v, which gets
    # parse_bufspec from here: it cannot import this module).
    _bufspec = staticmethod(parse_bufspec)
    _base = staticmethod(as_base_array)
    Gatherv, Igatherv, Gatherv_init = _faces('Gatherv', 'gatherv', VMethods._gatherv,
                                             (_SR, (('root', 0),)))
    Scatterv, Iscatterv, Scatterv_init = _faces('Scatterv', 'scatterv', VMethods._scatterv,
                                                (_SR, (('root', 0),)))
    Allgatherv, Iallgatherv, Allgatherv_init = _faces('Allgatherv', 'allgatherv',
                                                      VMethods._allgatherv, (_SR, ()))
    Alltoallv, Ialltoallv, Alltoallv_init = _faces('Alltoallv', 'alltoallv', VMethods._alltoallv,
                                                   (_SR, ()))
    Scan, Iscan, Scan_init = _faces('Scan', 'scan', VMethods._scan, (_SR, ((_OP, _SUM),)))
    Exscan, Iexscan, Exscan_init = _faces('Exscan', 'exscan', VMethods._exscan,
                                          (_SR, ((_OP, _SUM),)))
