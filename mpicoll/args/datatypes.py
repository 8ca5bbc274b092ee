"""Derived MPI datatypes at :class:`mpicoll.P2PComm`'s boundary.

mpicoll's algorithms move and reduce flat, contiguous arrays of one element
type. A buffer given with a derived datatype (``[buf, count, dtype]``,
``[buf, (count, displ), dtype]`` and the v-forms) is converted once, at the
boundary of the call, by MPI itself:

- the *element type* of the flat array is the one predefined type every
  element of the datatype's type signature has (found by decoding the
  datatype, ``Datatype.decode``, down to its predefined leaves), so that a
  derived datatype on one rank matches a plain ``[buf, MPI.DOUBLE]`` on
  another as MPI's type matching says; a signature mixing types (a struct
  of an int and a double) travels as bytes (``uint8``), and then every rank
  must give such a datatype;
- the send side is packed with ``MPI_Pack`` (``Datatype.Pack``) into that
  array before the algorithm runs, the receive side unpacked with
  ``MPI_Unpack`` after it has completed: extents, lower bounds, holes,
  resized and interleaved types land exactly where MPI puts them, because
  MPI computes the layout — nothing here re-implements it;
- a datatype whose type map is its elements back to back from byte 0
  (``Dup``, ``Create_contiguous``, a vector with stride = blocklength,
  ``Create_resized`` to its own size — decided structurally, from the
  decoded constructors) needs no copy: the flat array is a view of the
  caller's memory, host or device.

Send and receive datatypes may differ as long as their signatures match
(three contiguous doubles sent, received as a strided vector of three).
Reductions follow MPI: a predefined op over a datatype whose elements are
all one predefined type; the send and receive datatypes of a reduction are
one and the same (mpi4py checks it too). A user-defined op over a derived
datatype reduces whole packed entries through the datatype
(:mod:`mpicoll.args.user_ops`): its function sees the layout it was written for.

Checks, each an :class:`ArgumentError` naming the argument (raised inside
``call.checking()``, so every rank raises before any message): a datatype
MPI will not use (not committed: MPI's own ``MPI_Pack_size`` says so),
negative counts, a count or block that reaches outside the buffer (with the
datatype's true lower and upper bounds, so holes and negative lower bounds
count as MPI counts them), a buffer length that is not a whole number of
extents when the count is inferred (as mpi4py), a read-only buffer that
would be unpacked into, and, on device memory, a datatype that is not
contiguous (``MPI_Pack`` runs on the host). Receive
blocks of a derived datatype are not checked for overlap: interleaved
blocks (resized column types) are the point of them, and telling overlap
from interleaving needs the full type map.

The conversions of one call are held by a :class:`Boundary`; its
:meth:`Boundary.finish` unpacks after a blocking call, when a nonblocking
request completes, and packs/unpacks around every ``Start`` of a
persistent one.
"""
import operator

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from ..core.blocks import offsets, split
from ..core.errors import ArgumentError, ArgumentTypeError, describe, non_negative
from ..device.arrays import adapter_of, empty
from .buffers import ENTRIES
from .user_ops import EntryOp
from .vbuffers import per_rank

__all__ = ["is_derived", "TypeInfo", "type_info", "byte_view", "Boundary"]

_COMBINERS = {getattr(MPI, n): n[len("COMBINER_"):].lower()
              for n in dir(MPI) if n.startswith("COMBINER_")}


def is_derived(datatype):
    """True for a derived (user-built) MPI datatype."""
    return (isinstance(datatype, MPI.Datatype) and datatype != MPI.DATATYPE_NULL
            and not datatype.is_predefined)


def _type_name(dt):
    name = dt.Get_name()
    if name:
        return name
    return f"a derived datatype ({_COMBINERS.get(dt.combiner, 'unknown')})"


def _mpi_reason(exc):
    """The last line of an MPI error (MPICH stacks its call chain above it)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    last = lines[-1] if lines else exc.Get_error_string()
    return last.split("): ", 1)[-1]


class TypeInfo:
    """What a call needs to know of one derived datatype.

    ``leaf``: the NumPy dtype of every element of the type signature, or
    None when they are not all one predefined type with a plain NumPy
    equivalent; ``elem``: the element type of the flat array (``leaf``, or
    ``uint8``); ``per_entry``: elements of ``elem`` per entry of the
    datatype; ``contiguous``: the type map is its elements back to back
    from byte 0 (a flat view of the caller's memory is the packed form).
    """

    __slots__ = ("dt", "name", "size", "extent", "true_lb", "true_ub", "leaf", "leaves",
                 "elem", "per_entry", "contiguous")


def _leaf_dtype(dt):
    try:
        d = dtlib.to_numpy_dtype(dt)
    except (ValueError, KeyError, TypeError):
        return None
    if d.kind not in "biufc" or d.fields is not None or d.subdtype is not None:
        return None
    return d


def _free(types):
    for d in types:
        if d is not None and d != MPI.DATATYPE_NULL and not d.is_predefined:
            d.Free()


def _walk(dt, leaves):
    """Add ``dt``'s predefined leaf types to ``leaves`` (name -> NumPy dtype or None).

    Returns True when ``dt`` is, by construction, its leaf elements back to
    back from byte 0 in signature order (checked against MPI's own extents
    by :func:`type_info`). Decodes the constructors only; layout is MPI's.
    """
    if dt.is_predefined:
        leaves[dt.Get_name() or str(dt.handle)] = _leaf_dtype(dt)
        return dt.Get_extent() == (0, dt.Get_size())
    base, combiner, params = dt.decode()
    subs = list(params["datatypes"]) if combiner == "STRUCT" else [base]
    try:
        if combiner == "STRUCT":
            for length, sub in zip(params["blocklengths"], subs, strict=True):
                if length:
                    _walk(sub, leaves)
            return False
        back_to_back = _walk(base, leaves)
        if combiner in ("DUP", "CONTIGUOUS"):
            return back_to_back
        if combiner == "VECTOR":
            return back_to_back and (params["count"] <= 1
                                     or params["stride"] == params["blocklength"])
        if combiner == "HVECTOR":
            width = params["blocklength"] * base.Get_extent()[1]
            return back_to_back and (params["count"] <= 1 or params["stride"] == width)
        if combiner == "RESIZED":
            return back_to_back and params["lb"] == 0 and params["extent"] == base.Get_extent()[1]
        return False        # indexed, hindexed, subarray, darray, ...: packed by MPI
    finally:
        _free(subs)


_pack_plain = None


def _check_pack_format():
    """Check that MPI_Pack of this MPI gives the raw bytes of the signature.

    It must, and it does on homogeneous systems (MPICH, Open MPI); then packed data and
    plain arrays agree across ranks.
    """
    global _pack_plain
    if _pack_plain is None:
        t = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()
        try:
            src = np.full(16, 0xA5, np.uint8)
            src[:4] = np.frombuffer(np.int32(7).tobytes(), np.uint8)
            src[8:] = np.frombuffer(np.float64(2.5).tobytes(), np.uint8)
            out = bytearray(max(t.Pack_size(1, MPI.COMM_SELF), 12))
            pos = t.Pack(src, out, 0, MPI.COMM_SELF)
            _pack_plain = pos == 12 and bytes(out[:12]) == src[:4].tobytes() + src[8:].tobytes()
        finally:
            t.Free()
    if not _pack_plain:
        raise ArgumentError(
            "datatype: this MPI's MPI_Pack does not produce the plain bytes of the data (a "
            "heterogeneous representation), so mpicoll cannot run derived datatypes; use the "
            "native communicator", MPI.ERR_TYPE)


#: Whether MPI_Pack_size tells an uncommitted datatype (MPICH: an error). Open MPI 5.0
#: crashes on one instead (seen 2026-12-01), so there an uncommitted datatype is not
#: detected: MPI's own calls on it fail as they would without mpicoll.
_ASKS_COMMIT = "Open MPI" not in MPI.Get_library_version()


def type_info(argname, dt):
    """Analyse a derived datatype for one call; :class:`ArgumentError` if MPI will not use it."""
    name = _type_name(dt)
    if _ASKS_COMMIT:
        try:
            dt.Pack_size(1, MPI.COMM_SELF)      # MPI's own check: committed, valid
        except MPI.Exception as exc:
            raise ArgumentError(
                f"{argname}: expected a committed datatype; MPI refuses {name}: "
                f"{_mpi_reason(exc)} (call .Commit() on a derived datatype before using it)",
                MPI.ERR_TYPE) from None
    _check_pack_format()
    info = TypeInfo()
    info.dt, info.name = dt, name
    info.size = dt.Get_size()
    info.extent = dt.Get_extent()[1]
    info.true_lb, true_extent = dt.Get_true_extent()
    info.true_ub = info.true_lb + true_extent
    leaves = {}
    back_to_back = _walk(dt, leaves)
    info.leaves = sorted(leaves)
    kinds = set(leaves.values())
    info.leaf = kinds.pop() if len(kinds) == 1 and None not in kinds else None
    info.elem = info.leaf if info.leaf is not None else np.dtype(np.uint8)
    info.per_entry = info.size // info.elem.itemsize
    info.contiguous = (back_to_back and info.leaf is not None and info.size > 0
                       and dt.Get_extent() == (0, info.size)
                       and (info.true_lb, true_extent) == (0, info.size))
    return info


def byte_view(argname, base):
    """The caller's buffer as a flat ``uint8`` array in memory order (host or device)."""
    if base.flags.c_contiguous:
        flat = base.reshape(-1)
    elif base.flags.f_contiguous:
        flat = base.T.reshape(-1)
    else:
        raise ArgumentError(
            f"{argname}: expected a contiguous buffer (MPI addresses a datatype's entries "
            f"from the buffer's start); got a non-contiguous view of shape "
            f"{tuple(base.shape)} with strides "
            f"{tuple(base.strides)}", MPI.ERR_BUFFER)
    return flat.view(np.uint8)


_index = non_negative   # mpicoll.core.errors: one rule for counts and displacements


def _integer(argname, value, what):
    """An integer (negative allowed: MPI's displacements may be)."""
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{argname}: expected an integer {what}; got {value!r}",
                                MPI.ERR_ARG)
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{argname}: expected an integer {what}; got {describe(value)}",
                                MPI.ERR_ARG) from None


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


class _Blocks:
    """Runs of datatype entries in the caller's memory <-> consecutive runs of a flat array.

    ``spans``: (byte offset in ``mem``, entries) per run, in the flat
    array's order. Contiguous datatypes copy slices (host or device);
    others go through ``MPI_Pack`` / ``MPI_Unpack`` at the run's address.
    """

    __slots__ = ("comm", "info", "mem", "flat", "raw", "runs")

    def __init__(self, comm, info, mem, spans, flat):
        self.comm, self.info, self.mem, self.flat = comm, info, mem, flat
        self.raw = flat.view(np.uint8)
        runs, at = [], 0
        for off, n in spans:
            nbytes = n * info.size
            if nbytes:
                runs.append((off, n, at, at + nbytes))
            at += nbytes
        self.runs = runs

    def _address(self):
        return self.mem.__array_interface__["data"][0]

    def pack(self):
        """Caller's memory -> flat array."""
        info, raw = self.info, self.raw
        if info.contiguous:
            for off, _n, a, b in self.runs:
                raw[a:b] = self.mem[off:off + (b - a)]
            return
        base, dt, extent = self._address(), info.dt, info.extent
        for off, n, a, b in self.runs:
            dt.Pack(MPI.buffer.fromaddress(base + off, n * extent, True), raw[a:b], 0, self.comm)

    def unpack(self):
        """Flat array -> caller's memory."""
        info, raw = self.info, self.raw
        if info.contiguous:
            for off, _n, a, b in self.runs:
                self.mem[off:off + (b - a)] = raw[a:b]
            return
        base, dt, extent = self._address(), info.dt, info.extent
        for off, n, a, b in self.runs:
            dt.Unpack(raw[a:b], 0, MPI.buffer.fromaddress(base + off, n * extent), self.comm)


class Boundary:
    """The derived-datatype buffers of one :class:`mpicoll.P2PComm` call.

    ``simple``/``vector`` turn a buffer given with a derived datatype into
    the flat array the algorithm works on (packing send buffers at once);
    :meth:`finish` unpacks the receive buffers when the call's data is
    there. ``given`` records each parsed argument's datatype (None for a
    bare buffer) for the reduction checks.
    """

    def __init__(self, comm):
        self.comm = comm
        self.inputs = []          # packed before the algorithm (again at each persistent Start)
        self.outputs = []         # unpacked after it
        self.types = {}           # argname -> TypeInfo of its derived datatype
        self.given = {}           # argname -> the MPI datatype given (None: from the buffer)
        self.entry_type = None    # TypeInfo when a user op reduces whole packed entries

    # -- parsing -------------------------------------------------------
    def simple(self, argname, base, count, displ, dt, blocks, role):
        """``[buf, count, dt]`` / ``[buf, (count, displ), dt]`` -> a flat array.

        The array holds ``count * blocks`` entries.
        """
        info = type_info(argname, dt)
        self.types[argname] = info
        mem = byte_view(argname, base)
        nbytes, extent = mem.size, info.extent
        off = 0
        if displ is not None:
            d = _index(f"{argname} displacement", displ, "displacement")
            if d:
                if extent <= 0:
                    raise ArgumentError(
                        f"{argname}: cannot apply displacement {d}: {info.name} has extent "
                        f"{extent}", MPI.ERR_TYPE)
                off = d * extent
                if off > nbytes:
                    raise ArgumentError(
                        f"{argname}: displacement {d} (x extent {extent} = byte {off}) is beyond "
                        f"the buffer's {nbytes} bytes", MPI.ERR_COUNT)
        if count is None:
            length, n = nbytes - off, 0
            if length:
                if extent <= 0:
                    raise ArgumentError(
                        f"{argname}: cannot infer the count: {info.name} has extent {extent}; "
                        f"give [buf, count, datatype]", MPI.ERR_TYPE)
                if length % extent:
                    raise ArgumentError(
                        f"{argname}: cannot infer the count: the buffer's {length} bytes "
                        "are not a "
                        f"whole number of entries of {info.name} (extent {extent} bytes); give "
                        f"[buf, count, datatype]", MPI.ERR_COUNT)
                n = length // extent
                if blocks > 1 and n % blocks:
                    raise ArgumentError(
                        f"{argname}: cannot infer the count: {n} entries of {info.name} are not a "
                        f"multiple of {blocks} blocks (one per rank)", MPI.ERR_COUNT)
            count = n // blocks
        else:
            count = _index(f"{argname} count", count)
        return self._flat(argname, info, mem, [(off, count * blocks)], role, None)

    def vector(self, argname, base, counts, displs, dt, size, role):
        """A v-buffer with a derived datatype -> (flat array, counts, displs) in flat elements.

        ``counts`` and ``displs`` are as mpi4py takes them: None, one integer
        or one per rank, in entries and in extents of ``dt``. The blocks are
        laid back to back, in rank order, in the flat array.
        """
        info = type_info(argname, dt)
        self.types[argname] = info
        mem = byte_view(argname, base)
        extent = info.extent
        if counts is None:
            n = 0
            if mem.size:
                if extent <= 0 or mem.size % extent:
                    raise ArgumentError(
                        f"{argname}: cannot infer the counts: the buffer's {mem.size} bytes "
                        "are not "
                        f"a whole number of entries of {info.name} (extent {extent} bytes); give "
                        f"the counts", MPI.ERR_COUNT)
                n = mem.size // extent
            counts = split(n, size)
        elif _is_int(counts):
            counts = [_index(f"{argname} counts", counts)] * size
        else:
            counts = per_rank(f"{argname} counts", counts, size, "count", _index)
        if displs is None:
            displs = offsets(counts)[:-1]
        elif _is_int(displs):
            displs = [operator.index(displs) * i for i in range(size)]
        else:
            displs = per_rank(f"{argname} displs", displs, size, "displacement", _integer)
        if extent <= 0 and any(counts):
            raise ArgumentError(f"{argname}: {info.name} has extent {extent}; mpicoll needs a "
                                f"positive extent to place v-blocks", MPI.ERR_TYPE)
        spans = [(displs[i] * extent, counts[i]) for i in range(size)]
        flat = self._flat(argname, info, mem, spans, role, "block ")
        k = info.per_entry
        fcounts = [c * k for c in counts]
        return flat, fcounts, offsets(fcounts)[:-1]

    def _flat(self, argname, info, mem, spans, role, block):
        """Check the spans against the buffer; a view of it, or a packed copy."""
        for i, (off, n) in enumerate(spans):
            if n and info.size:
                _check_span(argname, info, off, n, mem.size, f"{block}{i}: " if block else "")
        nelem = sum(n for _, n in spans) * info.per_entry
        if nelem == 0:
            return empty(mem, 0, info.elem)
        if info.extent <= 0:
            raise ArgumentError(
                f"{argname}: {info.name} has extent {info.extent}; mpicoll packs entries through "
                f"MPI_Pack, which mpi4py counts in extents, so it needs a positive extent",
                MPI.ERR_TYPE)
        if role != "send":
            _check_written_once(argname, info, spans, self.comm, block)
        if info.contiguous:
            used = [(off, n) for off, n in spans if n]
            if all(o1 == o0 + n0 * info.size
                   for (o0, n0), (o1, _) in zip(used, used[1:], strict=False)):
                start = used[0][0]
                return mem[start:start + nelem * info.elem.itemsize].view(info.elem)   # no copy
        elif adapter_of(mem) is not None:
            raise ArgumentError(
                f"{argname}: {info.name} is not contiguous and the buffer is in device memory; "
                f"mpicoll packs such datatypes with MPI_Pack, which reads host memory (use a "
                f"host buffer, or a contiguous datatype)", MPI.ERR_TYPE)
        if role != "send" and adapter_of(mem) is None and not mem.flags.writeable:
            raise ArgumentError(
                f"{argname}: expected a writable buffer (it receives data); got a read-only "
                f"one", MPI.ERR_BUFFER)
        flat = empty(mem, nelem, info.elem)
        conv = _Blocks(self.comm, info, mem, spans, flat)
        if role in ("send", "inout"):
            conv.pack()
            self.inputs.append(conv)
        if role in ("recv", "inout"):
            self.outputs.append(conv)
        return flat

    # -- checks --------------------------------------------------------
    def per_entry(self, *argnames):
        """Flat elements per entry of the first derived argument among ``argnames`` (else 1)."""
        if self.entry_type is not None:
            return 1                          # packed entries (a user op): one element each
        for name in argnames:
            info = self.types.get(name)
            if info is not None:
                return info.per_entry
        return 1

    def reduction(self, op, sendbuf, recvbuf, send="sendbuf", recv="recvbuf"):
        """MPI's rules for a reduction over derived datatypes (ArgumentError if broken).

        Returns ``(sendbuf, recvbuf)``: as given, or — for a user-defined op
        (an :class:`mpicoll.args.user_ops.EntryOp`) over a derived datatype —
        viewed as whole packed entries, which the op then reduces through
        the datatype (see :mod:`mpicoll.args.user_ops`).
        """
        derived = [(n, self.types[n]) for n in (send, recv) if n in self.types]
        if not derived:
            return sendbuf, recvbuf
        self._same_datatype(send, recv)
        if isinstance(op, EntryOp):
            return self._entries(op, derived[0][1], sendbuf, recvbuf)
        for name, info in derived:
            if info.leaf is None:
                raise ArgumentError(
                    f"{name}: MPI's predefined ops reduce a derived datatype only when every "
                    f"element is one predefined type; {info.name} has "
                    f"{', '.join(info.leaves) or 'no elements'}", MPI.ERR_OP)
        return sendbuf, recvbuf

    def _same_datatype(self, send, recv):
        if send in self.given and recv in self.given:
            s, r = self.given[send], self.given[recv]
            if s is None or r is None or s != r:
                def show(dt):
                    if dt is None:
                        return "the buffer's own type"
                    return _type_name(dt) if is_derived(dt) else (dt.Get_name() or str(dt))
                raise ArgumentError(
                    f"{recv}: expected the datatype of {send} ({show(s)}): a reduction takes one "
                    f"datatype for both buffers; got {show(r)}", MPI.ERR_TYPE)

    def _entries(self, op, info, sendbuf, recvbuf):
        """The buffers as packed entries of ``info`` for user op ``op``."""
        bufs = [b for b in (sendbuf, recvbuf) if b is not None and b is not MPI.IN_PLACE]
        if any(adapter_of(b) is not None for b in bufs):
            raise ArgumentError(
                f"op: a user-defined op over derived datatype {info.name} runs on the host "
                f"(MPI_Pack/MPI_Unpack around each local reduction); got device memory: use a "
                f"predefined op, a predefined datatype, or host buffers", MPI.ERR_OP)
        if info.size == 0:
            return sendbuf, recvbuf           # nothing to reduce
        op.entries = info
        self.entry_type = info
        entry = np.dtype((np.void, info.size), metadata={ENTRIES: True})

        def view(b):
            return b if b is None or b is MPI.IN_PLACE else b.view(np.uint8).view(entry)
        return view(sendbuf), view(recvbuf)

    # -- completion ----------------------------------------------------
    def pack(self):
        """Pack every input buffer (caller's memory -> flat array)."""
        for conv in self.inputs:
            conv.pack()

    def unpack(self):
        """Unpack every output buffer (flat array -> caller's memory)."""
        for conv in self.outputs:
            conv.unpack()

    def finish(self, call):
        """Unpack after the core ran the call.

        Now (blocking), at completion (nonblocking), or around every Start (persistent).
        """
        if not self.inputs and not self.outputs:
            return
        if call.kind is None:
            self.unpack()
            return
        req = call.request
        if req is None:
            return
        if call.kind == "start":
            if self.outputs:
                req.then(self.unpack)
            return
        req.around_start(self.pack if self.inputs else None,
                         self.unpack if self.outputs else None)


def _entry_bytes(info, comm):
    """The byte offsets (from an entry's start) that one entry of ``info`` touches.

    MPI_Unpack of one entry of 0xFF bytes into zeros, read back.
    """
    scratch = np.zeros(info.true_ub - info.true_lb, np.uint8)
    at = scratch.__array_interface__["data"][0] - info.true_lb   # the entry's start
    info.dt.Unpack(np.full(info.size, 0xFF, np.uint8), 0,
                   MPI.buffer.fromaddress(at, info.extent), comm)
    return np.flatnonzero(scratch) + info.true_lb


def _check_written_once(argname, info, spans, comm, block):
    """Raise if the receive ``spans`` write any location twice (MPI forbids it).

    The spans (byte offset, entries; one per rank for a v-buffer) must touch disjoint
    bytes -- across blocks, and between the entries of one block (a resized datatype).

    Blocks whose byte ranges do not meet, of a datatype whose entries do not
    either, pass at once. Otherwise (the interleaving idiom: a vector type resized
    to one element's extent, blocks at consecutive displacements) the exact bytes
    are compared, from the datatype's own typemap (:func:`_entry_bytes`).
    """
    ext, width = info.extent, info.true_ub - info.true_lb
    live = [(i, off, n) for i, (off, n) in enumerate(spans) if n and info.size]
    if not live:
        return
    ranges = sorted((off + info.true_lb, off + (n - 1) * ext + info.true_ub) for _, off, n in live)
    if ext >= width and all(hi <= lo
                            for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False)):
        return
    pos = _entry_bytes(info, comm)

    def touched(off, n):
        return ((off + np.arange(n, dtype=np.int64) * ext)[:, None] + pos[None, :]).ravel()

    seen = np.zeros(max(hi for _, hi in ranges), dtype=bool)
    for i, off, n in live:
        idx = touched(off, n)
        twice = None
        if ext < width and np.unique(idx).size < idx.size:
            u, c = np.unique(idx, return_counts=True)
            twice = (int(u[c > 1][0]), i)
        elif seen[idx].any():
            byte = int(idx[seen[idx]][0])
            twice = (byte, next(j for j, o, m in live if byte in touched(o, m)))
        if twice is not None:
            byte, j = twice
            if j == i:
                what = (f"{block}{i}: " if block else "") + (
                    f"its entries of {info.name} (extent {ext} bytes, each touching bytes "
                    f"[{info.true_lb}, {info.true_ub}) of its own) overlap: byte {byte} would be "
                    f"written twice")
            else:
                what = f"{block}{j} and {block}{i} would both write byte {byte}"
            raise ArgumentError(f"{argname}: {what}; MPI forbids a receive that writes any "
                                f"location twice", MPI.ERR_BUFFER)
        seen[idx] = True


def _check_span(argname, info, off, n, nbytes, what):
    """``n`` entries of ``info`` from byte ``off``: every byte MPI touches inside [0, nbytes)."""
    first, last = off, off + (n - 1) * info.extent
    lo = min(first, last) + info.true_lb
    hi = max(first, last) + info.true_ub
    if lo < 0 or hi > nbytes:
        raise ArgumentError(
            f"{argname}: {what}{n} entries of {info.name} (extent {info.extent} bytes, each "
            f"touching bytes [{info.true_lb}, {info.true_ub}) of its own) from byte {off} reach "
            f"bytes [{lo}, {hi}), outside the buffer's {nbytes} bytes", MPI.ERR_COUNT)
