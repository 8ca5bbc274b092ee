"""Repeated small calls skip what cannot have changed: the memo of a call's last good run.

A blocking functional call whose buffers are all given by the caller (NumPy
or device arrays, ``MPI.IN_PLACE`` or None) and that moves at most 64 KiB is
remembered after it ran: its bound plan steps (on host NumPy arrays, its
compiled program of persistent requests: :mod:`mpicoll.engine.program`), its
fingerprint and the facts its validation rested on. On host arrays the entry
is *fast*: it holds the call's objects, and the faces test it themselves with
one look-up of the call's identities and :meth:`_Entry.hit` (see
:mod:`mpicoll.engine.faces`). The next call with the *same objects* —
same communicator, same arrays (weakly referenced, with unchanged shape,
dtype, strides and writability), same op, root, counts and algorithm
argument, the same ``MPICOLL_<P>_ALGORITHM`` and ``MPICOLL_ALGORITHM`` — re-checks only those facts
and goes straight to the agreement step (the one native Allgather; none in
``local`` mode) and the plan's steps. Everything else (a different buffer,
a traffic recorder or tracer active, an error anywhere)
takes the full path, which validates and agrees as always.

Buffers may also come in mpi4py's list specs (``[y, (counts, displs)]``,
``[x, MPI.DOUBLE]``: :func:`run_specs`, :func:`start_specs`, and
``P2PComm``'s methods): the key is the arrays in them plus their counts,
displacements and predefined datatypes *by value* (:func:`spec_parts`,
:class:`Parts`; a derived datatype takes the full path). A call that exchanged a value before
it could validate (the v-collectives' counts, :meth:`Call.exchange`) replays
that exchange first, with the fingerprints it gathered then: if every rank
sent the same, the counts and the steps bound to them hold; if not (a peer
changed its count, took another call, or failed), this rank goes on along
the full path with what the exchange gathered (``Call.given``), so every rank
makes one exchange and one agreement as the full path does.

Device arrays (CuPy, or any registered adapter's weakly referable arrays)
are remembered with the transport their steps were bound to (staged,
CUDA-aware or ipc: one per call, reusable once the call completed); the
entry replays on it, on the arrays' device, only while
:func:`mpicoll.device.arrays.transport_key` is unchanged, and is dropped if a
replay fails: the next call binds a fresh transport (as after any failed
collective, messages the failed call posted may still be pending in MPI; a
communicator that saw a failure is best freed).

A nonblocking call (``mpicoll.iallreduce``, ``P2PComm.Iallreduce``, ...)
on the same terms is remembered too, as the program its request ran (see
:func:`start`): the next identical call makes its request from that
program — a new tag, the same ``Iallgather`` agreement, no validation,
choice or binding — once the request last made from it has completed
without error; until then (the same call made again while its twin is in
flight) it takes the full path. Persistent requests need no memo: they bind once.

The memo keeps the last 256 calls (32 on device arrays; the oldest is
dropped first) and the arrays their steps are bound to alive; a view of a
base, or a buffer spec over an array, larger than 64 KiB is never remembered
(it would be kept alive: ``x[:8]`` of a large array, or ``[x, 8, MPI.DOUBLE]``,
takes the full path every time), and :func:`mpicoll.gpu.release_staging` forgets the device
entries (they hold pinned arenas). This is what turns a ~50 µs Python call into a few µs
(benchmarks/latency.md).
"""
import weakref

import numpy as np
from mpi4py import MPI

from ..core import watchdog as _wd
from ..core.env import raw_reader
from ..core.registry import env_key, env_var
from ..device import arrays as _device
from ..device import reduce as _reduce
from . import context as _context
from . import fingerprint as fpr
from . import nonblocking as _nb
from .call import Call, allgather, env_mode, ipc_flags, next_request_tag
from .program import Program

__all__ = ["BY_VALUE", "MISS", "run", "start", "run_specs", "start_specs", "spec_parts",
           "parts_of", "Parts", "device_binding", "memoizable", "wanted", "array_or_none",
           "remember", "forget_device", "LIMIT"]

LIMIT = 1 << 16           # bytes moved per rank: larger calls do not need the memo
_MAX = 256
_MAX_DEVICE = 32          # of which on device arrays (GPU memory they keep alive)
_memo = {}


def _observed():
    """True while a traffic recorder or a tracer watches calls.

    Each call must then be counted and traced as it runs, so none is served or remembered
    by the memo.
    """
    return bool(_context._recorders) or _context.trace_hook is not None or \
        _reduce.trace_hook is not None


def memoizable(bufs):
    """True when every buffer passes :func:`array_or_none`.

    Each is a NumPy array, a weakly referable device array, IN_PLACE or None.
    """
    for b in bufs:
        if not array_or_none(b):
            return False
    return not _observed()


def wanted(call, ctx, nbytes):
    """True when a call whose steps were just bound on ``ctx`` hands them to the memo.

    It was asked to (``call.memo``), nothing counts or traces it, and it moves at most
    :data:`LIMIT` bytes per rank.
    """
    return (call.memo is not None and ctx._rec is None and type(ctx) is _context.Ctx
            and nbytes <= LIMIT)


def array_or_none(b):
    """Whether ``b`` is a buffer the memo can key on.

    A NumPy array, a weakly referable device array, IN_PLACE or None -- and not a view of
    more than :data:`LIMIT` bytes (an entry's bound steps keep the view, hence its whole
    base, alive).
    """
    if b is None or b is MPI.IN_PLACE:
        return True
    if type(b) is not np.ndarray and (_device.adapter_of(b) is None
                                      or not _weakly_referable(b)):
        return False
    base = b.base
    return base is None or getattr(base, "nbytes", LIMIT + 1) <= LIMIT


_referable = {}


def _weakly_referable(b):
    ok = _referable.get(type(b))
    if ok is None:
        try:
            weakref.ref(b)
            ok = True
        except TypeError:
            ok = False
        _referable[type(b)] = ok
    return ok


def _key(primitive, comm, algorithm, bufs, rest):
    # Identities (cheap, and ``valid`` re-checks every value anyway), but the parts of
    # buffer specs (:class:`Parts`) and integers by value: both may be new objects at
    # every call (a root taken from a NumPy array is a new np.int64 each time).
    return (primitive, id(comm), algorithm, *map(id, bufs),
            *[r if type(r) in BY_VALUE else id(r) for r in rest])


class Parts(tuple):
    """The parts of a buffer spec other than its buffer, by value (:func:`parts_of`).

    The memo keys on them as they are, not on their identity.
    """

    __slots__ = ()


BY_VALUE = frozenset((Parts, int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                       np.uint32, np.uint64, np.intc, np.uintc, np.longlong, np.ulonglong))


def spec_parts(specs):
    """Buffer specs as the memo keys them: (the arrays, the specs' other parts), or None.

    None when some part is not one it can compare.

    A bare buffer is itself and its parts None; a list or tuple spec (mpi4py's
    ``[buf, counts, displs, datatype]`` forms) is its first item and
    :func:`parts_of` the rest. A spec over a buffer of more than :data:`LIMIT`
    bytes is not keyed (``[x, 8, MPI.DOUBLE]`` moves 64 bytes: the entry would
    keep a large ``x`` alive).
    """
    bufs, parts = [], []
    for spec in specs:
        if type(spec) is list or type(spec) is tuple:
            part = parts_of(spec[1:]) if spec else None
            if part is None or getattr(spec[0], "nbytes", 0) > LIMIT:
                return None             # a small count of a large buffer: it would be kept
            bufs.append(spec[0])
            parts.append(part)
        else:
            bufs.append(spec)
            parts.append(None)
    return tuple(bufs), tuple(parts)


def parts_of(x):
    """``x`` (counts, displacements, datatypes, or a sequence of them) as :class:`Parts`.

    By value; None when some part is not one the memo can compare.

    Integers, sequences or NumPy vectors of integers, predefined datatypes (by
    handle); each sequence keeps its kind (mpi4py reads ``[y, (c, d)]`` as counts
    and displacements, ``[y, [c, d]]`` as two counts). Anything else (a derived
    datatype, a bool, an object) leaves the call to the full path.
    """
    out = _plain(x)
    return None if out is None else Parts(out)


def _plain(x):
    t = type(x)
    if t is int or (isinstance(x, np.integer) and t is not np.bool_):
        return int(x)
    if t is list or t is tuple:
        out = (t, *map(_plain, x))
        return None if None in out else out
    if t is np.ndarray:
        return (t, *x.tolist()) if x.ndim == 1 and x.dtype.kind in "iu" else None
    if isinstance(x, MPI.Datatype) and x != MPI.DATATYPE_NULL and x.is_predefined:
        return ("datatype", x.handle)
    return None


def _by_value(counts):
    """A list, tuple or NumPy array of counts as a tuple of Python values.

    A 0-d array (a root given as ``np.array(0)``): its value.
    """
    if type(counts) is np.ndarray:
        values = counts.tolist()
        return tuple(values) if type(values) is list else values
    return tuple(counts)


def forget_device():
    """Drop every entry on device arrays (they hold transports and pinned arenas)."""
    for k in [k for k, e in _memo.items() if e.dev is not None]:
        del _memo[k]


_device.ON_RELEASE.append(forget_device)


class _Entry:
    __slots__ = ("comm", "pcomm", "state", "size", "refs", "facts", "rest", "steps",
                 "prologue", "static", "count", "var", "env", "out", "desc", "dev", "key", "ipc",
                 "primitive", "name", "rank", "xvalue", "xraw", "program", "fast", "arrays",
                 "env", "check_mode", "bufs")

    def holds(self):
        """Whether a *fast* entry still describes the call its key names (the hit test).

        The key holds the identities of the call's objects, and the entry holds the
        objects (``arrays``, ``rest``): no other object can take their identities while
        it lives. What can change under the same object is checked: each array's shape,
        strides and dtype, writability where the call writes it (a bound view keeps its
        memory: NumPy refuses to resize an array that has views), the communicator
        (freed: null), and the settings read by the call (``MPICOLL_CHECK``, and the
        algorithm variables when the call named none), by the identity of their stored
        values (:func:`mpicoll.core.env.raw_reader`). No tracer may be watching.
        """
        if not self.pcomm or _context.trace_hook is not None or \
                _reduce.trace_hook is not None:
            return False
        for b, fact, writes in self.arrays:
            if (b.shape, b.strides, b.dtype) != fact or (writes and not b.flags.writeable):
                return False
        for read, raw in self.env:
            if read() is not raw:
                return False
        return True

    def hit(self):
        """A fast entry's call made again, if it :meth:`holds`: the result, else :data:`MISS`.

        What the full path would do for this call, less what cannot have changed: the
        agreement step (one native ``Allgather`` of the fingerprint, none in ``local``
        mode), then the compiled program. Where the fingerprints differ, the full
        judgement raises on every rank (or runs the call, if the difference is harmless).
        """
        if not self.holds():
            return MISS
        state = self.state
        mode = state.mode or self.check_mode
        if mode != "local" and self.size > 1:
            mine = self.static + _pack_dynamic(
                state.seq, self.count,
                _FLAGS_CHECKED if mode == "checked" else fpr.FLAG_RECORDED, 0)
            every = state.raw
            self.pcomm.Allgather(mine, every)      # bytes: mpi4py sends them as MPI.BYTE
            if every != mine * self.size:
                return _judged(self.primitive, self.comm, self, _Judge(mine, every))
        return self.execute()

    def valid(self, comm, bufs, rest):
        if self.comm is not comm or not self.pcomm:       # a freed communicator is null
            return False
        for ref, fact, b in zip(self.refs, self.facts, bufs, strict=False):
            if ref is None:
                if b is not fact:
                    return False
            elif (ref() is not b or b.shape != fact[0] or b.strides != fact[2]
                  or b.dtype != fact[1] or (fact[3] and not b.flags.writeable)):
                return False
        for mine, r in zip(self.rest, rest, strict=False):
            if type(r) is list or type(r) is tuple or type(r) is np.ndarray:
                r = _by_value(r)        # counts: compared by value (they may be mutated)
            if mine is not r and mine != r:
                return False
        if self.dev is not None and _device.transport_key() != self.dev[3]:
            return False
        return self.var is None or env_key(self.var) == self.env

    def fingerprint(self):
        """This call's fingerprint (bytes) as the full path would build it.

        With its check mode, call number and flags. None when there is no agreement step
        (``local`` mode, one rank); :data:`_MISS` for a junk ``MPICOLL_CHECK`` (the full
        path reports it).
        """
        state = self.state
        # (a fast entry that holds read MPICOLL_CHECK when it was made, and it is unchanged)
        mode = state.mode or (self.check_mode if self.fast else env_mode())
        if mode is None:
            return _MISS
        if mode == "local" or self.size == 1:
            return None
        flags = fpr.FLAG_RECORDED | (fpr.FLAG_CHECKED if mode == "checked" else 0)
        if self.ipc:                    # (read now: MPICOLL_IPC_EAGER may have changed)
            flags |= ipc_flags(True)
        return self.static + _pack_dynamic(state.seq, self.count, flags, 0)

    def exchange_bytes(self):
        """This rank's part of the exchange made again (:meth:`exchange`), as bytes.

        For an entry with ``xraw``. :data:`_MISS` when it is not what it was when this
        entry was made (another check mode): the full path then makes the call.
        """
        gathered = self.xraw
        state = self.state
        flags = fpr.FLAG_CHECKED if _mode(state) == "checked" else 0
        mine = fpr.build_bytes(fpr.EXCHANGE, state.seq, self.name, flags, None, self.xvalue)
        gathered[:, fpr.C_SEQ] = state.seq   # the calls agree: every rank has this number
        return mine if mine == gathered[self.rank].tobytes() else _MISS

    def exchange(self, mine, kind=None, tag=None):
        """The exchange of a call that had one (the v-collectives' counts), made again.

        Made as the full path makes it (:meth:`mpicoll.engine.call.Call.exchange`), before
        the agreement; ``mine``: :meth:`exchange_bytes`. ``kind``, ``tag``: the call's (a
        nonblocking call has taken its tag already, as the full path's does when it is
        made).

        None: every rank sent what it sent when this entry was made, so the counts and
        the steps bound to them still hold. A :class:`~mpicoll.engine.call.Call` (its kind and
        tag taken, ``given`` the values gathered here): some rank sent something else --
        the call goes on along the full path from its exchange (a mismatch or an error
        elsewhere raises here, as it would there).
        """
        state = self.state
        raw = state.raw
        allgather(self.pcomm, mine, raw, kind)
        if raw == self.xraw.tobytes():
            return None
        call = Call(self.primitive, self.comm, kind, tag)
        values = call.judge(raw, mine, fpr.EXCHANGE)   # raises on a mismatch or an error
        call.given = (values, fpr.matrix(raw, self.size))
        return call

    def run(self):
        mine = self.fingerprint()
        if mine is _MISS:
            return _MISS
        if self.xraw is not None:             # the count exchange, made again first
            xmine = self.exchange_bytes()
            if xmine is _MISS:
                return _MISS
            call = self.exchange(xmine)
            if call is not None:
                return call
        if mine is not None:
            every = self.state.raw
            self.pcomm.Allgather(mine, every)      # bytes: mpi4py sends them as MPI.BYTE
            if every != mine * self.size:
                return _Judge(mine, every)
        return self.execute()

    def execute(self):
        self.state.seq += 1
        if self.dev is not None:
            return self._execute_on_device()
        if self.prologue is not None:
            np.copyto(*self.prologue)
        try:
            for step in self.steps:
                step()
        except BaseException:
            # A program's requests may still be active: never replayed again (its
            # requests are freed with it).
            if _memo.get(self.key) is self:
                del _memo[self.key]
            raise
        return self.out

    def _execute_on_device(self):
        transport, adapter, device, _ = self.dev
        try:
            with _device.on_device(adapter, device):
                if transport is not None:      # None: host mirrors (mpicoll.engine.host_copy)
                    transport.reset()
                if self.prologue is not None:
                    self.prologue[0][...] = self.prologue[1]
                for step in self.steps:
                    step()
        except BaseException:
            if _memo.get(self.key) is self:
                del _memo[self.key]     # the next call builds a fresh transport
            raise
        return self.out


class _RequestEntry(_Entry):
    """A remembered nonblocking call, replayed as the request of the next identical call.

    Its :class:`~mpicoll.engine.nonblocking.Program` (``steps``) is replayed once the
    request last made from it completed.
    """

    __slots__ = ("judge", "raw")

    def start(self):
        """The request of this call made again (new tag, new agreement), or :data:`_MISS`."""
        mine = self.fingerprint()
        if mine is _MISS:
            return _MISS
        xmine = None if self.xraw is None else self.exchange_bytes()
        if xmine is _MISS:
            return _MISS
        state = self.state
        tag = next_request_tag(state)        # taken when the call is made, as the full path's
        if xmine is not None:                # waited for, as in the full path
            call = self.exchange(xmine, "start", tag)
            if call is not None:
                return call
        state.seq += 1
        agreement = None
        if mine is not None:
            # As Call.settle does for a nonblocking call: the fingerprints travel by
            # Iallgather and are judged when the request first advances.
            every = self.raw
            req = self.pcomm.Iallgather([mine, MPI.BYTE], [every, MPI.BYTE])
            agreement = (req, every, mine, self.judge)
        program = self.steps
        try:
            if self.prologue is not None:   # an in-place call's snapshot of its input
                if program.scope is None:
                    np.copyto(*self.prologue)
                else:
                    with program.scope():
                        self.prologue[0][...] = self.prologue[1]
            return program.replay(tag, self.out, agreement)
        except BaseException:
            # Nothing of the algorithm was sent, but the fingerprint was: MPI keeps its
            # buffers until the Iallgather completes, and this entry is not used again.
            if agreement is not None:
                _nb.keep_until_complete(*agreement[:3])
            if _memo.get(self.key) is self:
                del _memo[self.key]
            raise


_MISS = object()
#: What :meth:`_Entry.hit` returns when the entry does not hold (the full path follows).
MISS = object()


_pack_dynamic = fpr.DYNAMIC.pack


def _mode(state):
    """The check mode a call on ``state``'s communicator runs in, as the full path resolves it.

    See :func:`mpicoll.engine.call.check_mode`; None for a junk ``MPICOLL_CHECK``.
    """
    return state.mode or env_mode()


class _Judge:
    """The fingerprints differ: hand them to the full judgement (raises on every rank)."""

    __slots__ = ("mine", "every")

    def __init__(self, mine, every):
        self.mine, self.every = mine, every



def _make_room(device):
    """Drop the oldest entries until one more fits.

    Dicts keep insertion order: a loop's calls, remembered last, survive what earlier code
    left behind. For a device entry, drop also until fewer than :data:`_MAX_DEVICE` device
    entries are left: each holds its arrays, scratch and transport on the GPU.
    """
    while len(_memo) >= _MAX:
        del _memo[next(iter(_memo))]
    if device:
        on_device = [k for k, e in _memo.items() if e.dev is not None]
        for k in on_device[:max(0, len(on_device) - _MAX_DEVICE + 1)]:
            del _memo[k]


def device_binding(transport, adapter, device):
    """What a device entry is bound to (the entry is valid while it holds).

    ``transport`` (None: host mirrors, :mod:`mpicoll.engine.host_copy`), the arrays'
    adapter and device, and :func:`mpicoll.device.arrays.transport_key` now.
    """
    return (transport, adapter, device, _device.transport_key())


def remember(call, comm, algorithm, bufs, rest, out, steps, prologue, dev=None, space=None):
    """Store a call that just ran on the memo's terms (``steps`` bound to its arrays).

    ``dev``: None for host arrays; for device arrays, :func:`device_binding`'s tuple.

    ``space``: the key's first part when not the primitive (P2PComm's methods,
    whose argument rules are mpi4py's, keep entries of their own).
    """
    idx = [i for i, b in enumerate(bufs) if b is out and out is not None]
    if out is not None and not idx:
        return                       # a result we allocated: a new one each call, no memo
    _make_room(dev is not None)
    request = isinstance(steps, _nb.Program)
    e = _RequestEntry() if request else _Entry()
    if request:
        e.judge = call                # judges the fingerprints of every replay
        e.raw = bytearray(len(call.state.raw))
    e.comm, e.pcomm, e.state, e.size = comm, call.pcomm, call.state, call.size
    e.primitive, e.name, e.rank = call.primitive, call.name, call.rank   # name: with its face
    e.xvalue, e.xraw = call.exchanged or (None, None)
    e.refs = tuple(None if b is None or b is MPI.IN_PLACE else weakref.ref(b) for b in bufs)
    # Device arrays have no read-only flag (CuPy's): False skips that check.
    e.facts = tuple(b if b is None or b is MPI.IN_PLACE else
                    (b.shape, b.dtype, b.strides, type(b) is np.ndarray and b.flags.writeable)
                    for b in bufs)
    e.dev = dev
    e.ipc = call.ipc                 # as the agreement step saw it (mpicoll.engine.call)
    e.rest = tuple(_by_value(r) if isinstance(r, (list, tuple, np.ndarray)) else r
                   for r in rest)
    e.program = None
    if isinstance(steps, Program):   # host steps compiled into persistent requests
        e.program, steps = steps, steps.steps
    e.steps, e.prologue = steps if request else tuple(steps), prologue
    e.desc = call.desc
    e.static, e.count = fpr.static_bytes(call.name, call.desc)
    e.var = None
    if algorithm is None:           # the environment chose: the entry holds while it says the same
        e.var = call.primitive
        e.env = env_key(e.var)
    e.out = out if idx else None
    e.key = _key(space or call.primitive, comm, algorithm, bufs, rest)
    _make_fast(e, algorithm, bufs, rest)
    _memo.pop(e.key, None)          # a call remembered again is the newest
    _memo[e.key] = e


_FLAGS_CHECKED = fpr.FLAG_RECORDED | fpr.FLAG_CHECKED
_CHECK = raw_reader("MPICOLL_CHECK")
_ALGORITHM = raw_reader("MPICOLL_ALGORITHM")
_readers = {}


def _make_fast(e, algorithm, bufs, rest):
    """Let entry ``e`` take the cheap hit test (:meth:`_Entry.holds`) where it may.

    A call (blocking or nonblocking) on host NumPy arrays whose other arguments are
    compared by identity or value in the key (not counts in lists, which are compared
    element by element), and that made no exchange before its agreement.
    """
    e.fast = False
    if e.dev is not None or e.xraw is not None:
        return
    for r in rest:
        if type(r) is list or type(r) is tuple or type(r) is np.ndarray:
            return
    arrays = []
    for b, fact in zip(bufs, e.facts, strict=True):
        if b is None or b is MPI.IN_PLACE:
            continue
        if type(b) is not np.ndarray:
            return
        arrays.append((b, (fact[0], fact[2], fact[1]), fact[3] and b is e.out))
    mode = env_mode()
    if mode is None:
        return
    readers = [_CHECK]
    if algorithm is None:
        var = env_var(e.primitive)
        read = _readers.get(var)
        if read is None:
            read = _readers[var] = raw_reader(var)
        readers += (read, _ALGORITHM)
    e.arrays = tuple(arrays)
    e.env = tuple((read, read()) for read in readers)
    e.bufs = bufs                   # held: no other object takes their identities
    e.check_mode = mode
    e.fast = True


def start(primitive, impl, comm, algorithm, bufs, rest, args, space=None):
    """One nonblocking call through the memo; its request.

    A hit replays the program the last identical call bound (its scratch,
    its device transport) as a new request with this call's tag, after the
    same ``Iallgather`` agreement as the full path — once the request last
    made from it completed without error (until then, and after an error,
    the call takes the full path). A miss runs ``impl`` (validation,
    agreement, plan) and remembers what it bound.

    ``space``: see :func:`remember` (default ``"i" + primitive``).
    """
    space = space or "i" + primitive
    observed = _observed()
    call = None
    if not observed:
        e = _memo.get(_key(space, comm, algorithm, bufs, rest))
        if e is not None and e.steps.idle() and (
                e.holds() if e.fast else e.valid(comm, bufs, rest)):
            req = e.start()
            if type(req) is Call:
                call = req                 # the exchange was made: the full path goes on
            elif req is not _MISS:
                return req
    if call is None:
        call = Call(primitive, comm, "start")
    if not observed and memoizable(bufs):
        call.memo = []
    out = impl(call, lambda: bufs, *args, algorithm)
    call.request.result = out
    if call.memo:
        remember(call, comm, algorithm, bufs, rest, out, *call.memo, space=space)
    return call.request


def _judged(primitive, comm, e, res):
    """Entry ``e``'s fingerprints differ somewhere (``res``): judge them, run it if harmless.

    The full judgement names the rank that differs and raises on every rank (every rank
    sees the same fingerprints, so every rank comes here).
    """
    call = Call(primitive, comm)
    call.desc = e.desc
    call.judge(res.every, res.mine)      # raises unless the difference is harmless
    return e.execute()


def run(primitive, impl, comm, algorithm, bufs, rest, args, space=None):
    """One functional call through the memo: a hit runs it, a miss runs ``impl`` and remembers it.

    ``space``: see :func:`remember`.
    """
    if _wd.ON and _wd.REC.name is None:      # the collective watchdog times the call
        return _wd.watched(run, primitive, comm, primitive, impl, comm, algorithm, bufs, rest,
                           args, space)
    if _nb._active:
        _nb.before_blocking()          # requests in flight advance while this call blocks
    call = None
    if not _observed():
        e = _memo.get(_key(space or primitive, comm, algorithm, bufs, rest))
        if e is None:
            pass
        elif e.fast:
            res = e.hit()
            if res is not MISS:
                return res
        elif e.valid(comm, bufs, rest):
            res = e.run()
            if res is _MISS:
                pass
            elif type(res) is _Judge:
                return _judged(primitive, comm, e, res)
            elif type(res) is Call:
                call = res             # the exchange was made: the full path goes on
            else:
                return res
    if call is None:
        call = Call(primitive, comm)
    if memoizable(bufs):
        call.memo = []
        out = impl(call, lambda: bufs, *args, algorithm)
        if call.memo:
            remember(call, comm, algorithm, bufs, rest, out, *call.memo, space=space)
        return out
    return impl(call, lambda: bufs, *args, algorithm)


def _through_specs(through):
    """:func:`run` or :func:`start` (``through``) for calls whose buffers are buffer specs.

    The buffers are mpi4py buffer specs (the v-collectives): keyed on the arrays in the
    specs and, by value, their other parts (:func:`spec_parts`); ``impl`` parses the specs
    themselves.
    """
    def with_specs(primitive, impl, comm, algorithm, specs, rest, args, space=None):
        parts = spec_parts(specs)
        if parts is None:           # lists the memo cannot key on: never memoizable
            return through(primitive, impl, comm, algorithm, specs, rest, args, space)
        bufs, tails = parts

        def full(call, _bufs, *more):
            return impl(call, lambda: specs, *more)
        return through(primitive, full, comm, algorithm, bufs, (*rest, *tails), args, space)
    with_specs.__name__ = with_specs.__qualname__ = through.__name__ + "_specs"
    return with_specs


run_specs = _through_specs(run)
start_specs = _through_specs(start)
