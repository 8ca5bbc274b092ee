"""Nonblocking and persistent collectives: requests that run a plan step by step.

A nonblocking call (``mpicoll.iallreduce``, ``P2PComm.Iallreduce``, ...)
validates its arguments, posts its fingerprint for agreement with an
``Iallgather`` and returns a :class:`Request` at once; no message of the
algorithm is sent before every rank's fingerprint has been judged. Each
``Test``/``Wait`` on any mpicoll request advances *every* active request —
the progress engine of libNBC: a request runs its bound steps until it
reaches a wait whose point-to-point requests are not complete, and resumes
there next time. Waiting on one request therefore never starves another
rank's wait on a different one, whatever order the ranks wait in.

Each request uses a tag of its own on the private communicator (the call
order is the same on every rank), so several may be outstanding on one
communicator, interleaved with the user's own point-to-point traffic and
with blocking mpicoll calls.

A persistent request (``mpicoll.allreduce_init``, ``P2PComm.Allreduce_init``)
is validated and agreed once when it is made, binds its plan to the buffers
once, and then runs with ``Start()`` / ``Wait()`` as often as needed. A
nonblocking call repeated on the same buffers gets much of that without
asking: :mod:`mpicoll.engine.memo` keeps its bound :class:`Program` and replays it
as the next identical call's request (with that call's tag and agreement).

Device buffers run in the engine on every transport (:mod:`mpicoll.device.arrays`,
:mod:`mpicoll.device.ipc`): the request's own transport posts each message, and a
wait step asks it (``test``) whether the messages are complete — a staged
receive has then landed on the device, an ``ipc`` message has been copied
or acknowledged — and which MPI requests to poll meanwhile (``pending``).
Its steps run with the data's device current (on the progress thread too).
Small device calls run on host copies instead (:mod:`mpicoll.engine.host_copy`):
the inputs are copied down in the caller's thread when the request starts,
the plan runs on host mirrors, and the copies back are its last steps.

Progress happens inside mpicoll calls only (``Test``, ``Wait``, ``waitall``,
``testall``), unless ``MPICOLL_PROGRESS=thread`` starts a progress thread
(see :mod:`.progress`). A *blocking* mpicoll call made while requests are in
flight starts that thread for as long as they are (:func:`before_blocking`;
``MPICOLL_PROGRESS=none`` forbids it), since a peer may wait for them first.
Calls that cannot run as a plan — ``native`` algorithms, the shm ones,
algorithms that cannot be recorded — complete when they are made: they wait
for the agreement and run blocking, then return a completed request.
"""
import threading
from functools import partial

from mpi4py import MPI

from ..core import watchdog as _wd
from ..core.env import raw_reader
from ..core.topology import layout
from ..device.arrays import on_device
from ..sched.record import is_array
from . import progress as _thread
from .context import CallTraffic, _recorders
from .program import compile_plan
from .run import assign, bind, scratch_for

_PROGRESS = raw_reader("MPICOLL_PROGRESS")   # set: Start takes the engine's own path

__all__ = ["Request", "PersistentRequest", "Program", "waitall", "testall", "active_count",
           "before_blocking"]

_active = []                   # started, not yet complete, in start order
_lock = threading.RLock()      # the progress thread and the caller share the list


def active_count():
    """Requests started and not yet complete (on this process)."""
    return len(_active)


class Request:
    """One nonblocking mpicoll collective.

    mpi4py's ``Wait()``/``Test()`` and torch's ``wait()``/``is_completed()``;
    ``result`` is what the blocking call would have returned (the output
    array, or None off the root of a rooted collective). Errors of the call
    (an argument error on another rank, a mismatch) are raised by
    ``Wait``/``Test`` on every rank.
    """

    def __init__(self, result=None):
        self.result = result
        self._steps = ()
        self._reqs = []
        self._pc = 0
        self._transport = None     # device buffers: the transport that tests the waits
        self._scope = None         # device buffers: makes the data's device current
        self._agreement = None     # (Iallgather request, every fingerprint, mine, call)
        self._error = None
        self._failed = False       # it ended in an error (the memo forgets its program)
        self._done = False

    # -- engine --------------------------------------------------------
    def _arm(self, steps, reqs, transport=None):
        self._steps, self._reqs, self._transport = steps, reqs, transport
        self._pc = 0
        self._done = False

    def _advance(self):
        """Run steps until a wait blocks; True once complete."""
        if self._done:
            return True
        if self._scope is not None:
            with self._scope():
                return self._advance_here()
        return self._advance_here()

    def _advance_here(self):
        try:
            if self._agreement is not None:
                req, raw, mine, call = self._agreement
                if not req.Test():
                    return False
                self._agreement = None
                call.judge(raw, mine)
            return self._run_steps()
        except Exception as exc:       # raised by Wait/Test on this rank
            self._error = exc
            self._failed = True
            self._done = True
            return True

    def _run_steps(self):
        steps, reqs, pc, n = self._steps, self._reqs, self._pc, len(self._steps)
        while pc < n:
            step = steps[pc]
            if type(step) is tuple:        # a wait on these request slots
                rs = [reqs[i] for i in step]
                t = self._transport
                if not (MPI.Request.Testall(rs) if t is None else t.test(rs)):
                    self._pc = pc
                    return False
            else:
                step()
            pc += 1
        self._pc = pc
        self._done = True
        return True

    def _blocking_on(self):
        """The MPI requests this one waits on now (what a wait polls)."""
        if self._agreement is not None:
            return [self._agreement[0]]
        if self._done or self._pc >= len(self._steps):
            return []
        step = self._steps[self._pc]
        if type(step) is not tuple:
            return []
        rs = [self._reqs[i] for i in step]
        return rs if self._transport is None else self._transport.pending(rs)

    def _passive(self):
        """True when MPI completes what this request waits on without this rank's help."""
        return self._transport is None or self._transport.passive or self._agreement is not None

    def then(self, fn):
        """Run ``fn()`` as the call's last step (at once if it already completed without error).

        For work that belongs to the call, e.g. unpacking a derived datatype's
        receive buffer (:mod:`mpicoll.args.datatypes`).
        """
        with _lock:                    # the progress thread may be running the steps
            if not self._done:
                self._steps = tuple(self._steps) + (fn,)
                return
            ok = self._error is None
        if ok:
            fn()

    # -- public --------------------------------------------------------
    def Test(self, status=None):
        """Advance every active request; True (raising its error, if any) once this one is done."""
        if not _thread.enabled():
            progress()
        if self._done:
            _auto_stop()
            self._raise()
            return True
        return False

    def Wait(self, status=None):
        """Advance every active request until this one is complete; raise its error, if any."""
        if _wd.ON and _wd.REC.name is None:  # the collective watchdog times the wait
            return _wd.wait_request(self)
        if _thread.enabled():
            with _done_cond:
                while not self._done:
                    _done_cond.wait()
        while not self._done:
            progress()
            if self._done:
                break
            if len(_active) == 1 and self._passive():
                # Alone: nothing else needs progress, wait for this step (or the agreement's
                # Iallgather) in MPI.
                try:
                    MPI.Request.Waitall(self._blocking_on())
                except BaseException:
                    self._failed = True        # its program is not replayed (mpicoll.engine.memo)
                    raise
                continue
            _thread.wait_any(pending_requests())     # yields the core between polls
        _auto_stop()
        self._raise()
        return self.result

    def _raise(self):
        err, self._error = self._error, None
        if err is not None:
            raise err

    # torch.distributed's Work
    def wait(self, timeout=None):
        """Block until the collective is complete (torch's ``Work.wait``); True."""
        self.Wait()
        return True

    def is_completed(self):
        """True once complete (torch's ``Work.is_completed``; as :meth:`Test`)."""
        return self.Test()

    def test(self):
        """True once complete (as :meth:`Test`)."""
        return self.Test()

    def __repr__(self):
        state = "complete" if self._done else f"at step {self._pc}/{len(self._steps)}"
        return f"<mpicoll.Request {state}>"


def progress():
    """Advance every active request once (the mpicoll progress engine)."""
    with _lock:
        if not _active:
            return
        done = [q for q in list(_active) if q._advance()]
        for q in done:
            _active.remove(q)
    if done and _thread.enabled():
        with _done_cond:
            _done_cond.notify_all()


_done_cond = threading.Condition()    # the progress thread completed something


def pending_requests():
    """Every MPI request the active mpicoll requests wait on now."""
    with _lock:
        return [r for q in _active for r in q._blocking_on() if r != MPI.REQUEST_NULL]


_thread._default_engine = (progress, pending_requests)


def _activate(req):
    if _PROGRESS() is not None and _thread.wanted() and not _thread.enabled():
        _thread.start()
    with _lock:
        _active.append(req)
    if _thread.enabled():
        _thread.wake()            # the thread posts the first round (one thread per MPI request)
    else:
        progress()                # post the first round now, as MPI would


class _Orphan:
    """An MPI request whose call already failed on this rank, kept until it completes.

    The failing rank of a nonblocking call has posted its fingerprint (the
    others need it to learn of the failure) and raised; the Iallgather and
    its buffers must live until MPI is done with them.
    """

    def __init__(self, request, *buffers):
        self._request, self._buffers = request, buffers

    def _advance(self):
        return self._request.Test()

    def _blocking_on(self):
        return [self._request]


def keep_until_complete(request, *buffers):
    """Hold ``request`` and its ``buffers`` in the progress engine until it completes."""
    with _lock:
        _active.append(_Orphan(request, *buffers))


class PersistentRequest(Request):
    """A persistent mpicoll collective: built once, ``Start()`` / ``Wait()`` many times."""

    def __init__(self, result=None):
        super().__init__(result)
        self._program = None       # (steps, their request list, device transport or None)
        self._eager = None         # a callable run at Start for calls without a plan
        self._done = True          # inactive until started
        self._freed = False
        self._persistent_mpi = False   # its messages are MPI persistent requests
        self._before = None        # (steps, scope) run at each Start first (host copies down)
        self._blocking = None      # a compiled program's steps with blocking waits (same order)
        self._compiled = None      # its mpicoll.engine.program.Program (frees its requests)
        self._plan = None          # (plan, primitive, algorithm, itemsize, comm): traffic()

    def Start(self):
        """Start the collective with the data now in the buffers."""
        if self._freed:
            raise MPI.Exception(MPI.ERR_REQUEST)
        if not self._done:
            raise RuntimeError("mpicoll: Start() on a persistent request that is still active "
                               "(Wait or Test it to completion first)")
        if self._eager is not None:
            self._eager()
            return
        if self._plan is not None and _recorders:
            _count_start(self._plan)       # made outside a traffic() block, started inside
        if self._blocking is not None and not _active and _thread._thread is None \
                and _PROGRESS() is None:
            self._start_alone()
            return
        steps, reqs, transport = self._program
        if self._before is not None:
            _run_before(*self._before)        # before it is armed: a failure leaves it inactive
        if not self._persistent_mpi:
            reqs[:] = [None] * len(reqs)      # the bound steps post into this very list
        self._arm(steps, reqs, transport)
        if transport is not None:
            transport.adapter.sync()          # the data were produced on the caller's stream
        _activate(self)

    start = Start

    def _start_alone(self):
        """Start a compiled program when no other request is active: its first round."""
        steps = self._steps = self._program[0]
        self._reqs = self._program[1]
        self._done = False
        _active.append(self)
        pc, n = 0, len(steps)
        try:
            while pc < n and type(steps[pc]) is not tuple:
                steps[pc]()
                pc += 1
        except BaseException:
            self._fail()
            raise
        self._pc = pc
        if pc == n:                     # nothing to wait for (one rank)
            self._done = True
            _active.remove(self)

    def _fail(self):
        """The program raised in the caller's thread: complete, failed, out of the engine."""
        self._failed = self._done = True
        with _lock:
            if self in _active:
                _active.remove(self)

    def Wait(self, status=None):
        """Complete the collective: the rest of its program in a row when it runs alone."""
        if self._blocking is not None and not self._done and _active == [self] \
                and _thread._thread is None and not _wd.ON:
            blocking = self._blocking
            try:
                for i in range(self._pc, len(blocking)):
                    blocking[i]()
            except BaseException:
                self._fail()
                raise
            self._done = True
            _active.clear()
            return self.result
        return Request.Wait(self, status)

    def around_start(self, before=None, after=None):
        """Make every ``Start`` run ``before()`` first and ``after()`` as its last step."""
        if self._program is not None:
            steps, reqs, transport = self._program
            steps = tuple(steps)
            if before is not None and self._before is not None:
                # On host copies: ``before`` (packing, say) ahead of the copies down.
                self._before = ((before, *self._before[0]), self._before[1])
            elif before is not None:
                steps = (before,) + steps
            if after is not None:
                steps = steps + (after,)
            self._program = (steps, reqs, transport)
            if self._blocking is not None:      # the same steps, in the same places
                blocking = self._blocking
                if before is not None and self._before is None:
                    blocking = (before,) + blocking
                if after is not None:
                    blocking = blocking + (after,)
                self._blocking = blocking
        eager = self._eager
        if eager is not None:
            def run():
                if before is not None:
                    before()
                eager()
                if after is not None:
                    after()
            self._eager = run

    def Free(self):
        """Release the request (it must be inactive)."""
        if not self._done:
            raise RuntimeError("mpicoll: Free() on an active persistent request")
        self._freed = True
        if self._compiled is not None:
            self._compiled.free()
        elif self._persistent_mpi:
            for r in self._program[1]:
                if r is not None and r != MPI.REQUEST_NULL:
                    r.Free()
        self._program = self._eager = self._before = None
        self._steps = ()               # what they hold (device arrays, pinned mirrors) goes

    def __repr__(self):
        return f"<mpicoll.PersistentRequest {'inactive' if self._done else 'active'}>"


def start(call, ctx, fn, args, op, entry, fast, run_now, prologue=None, memo=None, copies=None):
    """Make the request of a nonblocking or persistent call (``call.kind``).

    ``entry``: the plan cache entry, or None where the call cannot run as a
    plan; ``run_now()`` then runs it blocking (after the agreement).
    ``prologue``: (dst, src) copied before the plan runs — an in-place
    call's snapshot of its input, taken again at every persistent ``Start``.
    ``memo``: a list that receives the nonblocking call's :class:`Program`
    (:mod:`mpicoll.engine.memo` replays it as the next identical call's request).
    ``copies``: (before, after, scope) of a call on host copies of device
    arrays (:mod:`mpicoll.engine.host_copy`): ``before`` (the copies down) run when
    the request starts (now, or at each persistent ``Start``), in the caller's
    thread, ``after`` (the copies back) as the request's last steps, both
    under ``scope`` (the data's device current).
    """
    persistent = call.kind == "init"
    req = PersistentRequest() if persistent else Request()
    call.request = req
    req._what = (call.name, call.comm)      # named in the watchdog's report
    if entry is None:
        if persistent:
            req._eager = run_now
        else:
            _settle_now(call)
            run_now()
            req._done = True
        return req
    plan = entry.plan
    arrays = [a for a in args if is_array(a)]
    arrays += scratch_for(plan, ctx.like)          # its own: several may be in flight
    if persistent and fast and copies is None:
        _compile_persistent(req, call, ctx, plan, arrays, op, prologue)
        return req
    retag = [call.tag] if memo is not None and fast and not persistent else None
    steps, reqs = bind(plan, arrays, op, ctx, fast, nonblocking=True,
                       persistent=persistent and fast, retag=retag)
    if persistent and prologue is not None:
        steps.insert(0, partial(assign, prologue[0], prologue[1]))
    transport = None
    before = ()
    if ctx.mpi is not ctx.comm:
        transport = ctx.mpi
        req._scope = partial(on_device, transport.adapter, transport.device)
    if copies is not None:
        before, after, req._scope = copies
        steps += after
    if persistent:
        req._program = (tuple(steps), reqs, transport)
        req._persistent_mpi = fast
        if before:
            req._before = (before, req._scope)
        return req
    req._arm(tuple(steps), reqs, transport)
    if memo is not None:
        program = Program(req._steps, reqs, transport, req._scope, retag, ctx, before)
        program.last = req
        memo[:] = (program,)
    return _launch(req, transport, before,
                   None if call.pending is None else call.pending + (call,))


def _compile_persistent(req, call, ctx, plan, arrays, op, prologue):
    """Make ``req`` (a host persistent request) run ``plan`` as a compiled program.

    The program's messages are MPI persistent requests made once with the request's tag
    (:mod:`mpicoll.engine.program`); ``Start`` runs its steps up to the first wait, and
    ``Wait``, when no other request needs progress, the rest in a row.
    """
    program = compile_plan(plan, arrays, op, ctx.comm, call.tag)
    steps, blocking = list(program.engine_steps), list(program.steps)
    if prologue is not None:            # an in-place call's snapshot, taken at every Start
        snap = partial(assign, prologue[0], prologue[1])
        steps.insert(0, snap)
        blocking.insert(0, snap)
    req._program = (tuple(steps), program.requests, None)
    req._blocking = tuple(blocking)
    req._compiled = program
    req._persistent_mpi = True
    req._plan = (plan, call.primitive, call.algorithm, arrays[0].itemsize if arrays else 0,
                 ctx.comm)


class Program:
    """A nonblocking call's bound steps, replayable as the request of an identical call.

    What :mod:`mpicoll.engine.memo` keeps of a nonblocking call: the steps (bound
    to the call's arrays, its own scratch and, for device arrays, its own
    transport), their request slots, and where the tag lives — ``retag``
    (host steps bound to MPI directly) or ``ctx.tag`` (steps bound to the
    call's :class:`~mpicoll.engine.context.Ctx`). Like a persistent request's
    program it is reused only once the last request made from it completed.
    """

    __slots__ = ("steps", "reqs", "transport", "scope", "retag", "ctx", "before", "last")

    def __init__(self, steps, reqs, transport, scope, retag, ctx, before=()):
        self.steps, self.reqs, self.transport, self.scope = steps, reqs, transport, scope
        self.retag, self.ctx = retag, ctx
        self.before = before           # run in the caller's thread first (host copies down)
        self.last = None               # the request last made from it

    def idle(self):
        """True when the last request made from it completed without error."""
        last = self.last
        return last is None or (last._done and not last._failed)

    def replay(self, tag, result, agreement):
        """A new request running the steps with ``tag``.

        ``agreement``: (Iallgather request, every fingerprint, mine, call to judge them) or
        None.
        """
        if self.retag is not None:
            self.retag[0] = tag
        self.ctx.tag = tag
        reqs = self.reqs
        reqs[:] = [None] * len(reqs)
        req = Request(result)
        req._what = getattr(self.last, "_what", None)   # named in the watchdog's report
        req._scope = self.scope
        req._arm(self.steps, reqs, self.transport)
        self.last = req
        # (A raise here leaves the agreement's buffers to mpicoll.engine.memo, which keeps them.)
        return _launch(req, self.transport, self.before, agreement, keep=False)


def _count_start(info):
    """Count one ``Start`` of a compiled persistent request in the active traffic recorders."""
    plan, primitive, algorithm, itemsize, comm = info
    lay = layout(comm)
    rec = CallTraffic(primitive, algorithm, comm.Get_rank(), comm.Get_size(),
                      0, itemsize, "host", lay.nodes if lay.n_nodes > 1 else None)
    for kind, peer, n in plan.messages():
        rec._count(kind == "send", n * itemsize, peer)
    for r in _recorders:
        r.calls.append(rec)


def _launch(req, transport, before, agreement, keep=True):
    """Hand an armed request to the engine.

    The caller's stream synced (device data), its ``before`` steps run, its ``agreement``
    -- (Iallgather request, every fingerprint, mine, call) or None -- judged as it
    progresses. ``keep``: if the ``before`` steps raise, hold the agreement's request and
    buffers until it completes.
    """
    if transport is not None:
        transport.adapter.sync()       # the data were produced on the caller's stream
    try:
        _run_before(before, req._scope)
    except BaseException:
        if keep and agreement is not None:   # the fingerprint was sent: MPI keeps its buffers
            keep_until_complete(*agreement[:3])
        raise
    req._agreement = agreement
    _activate(req)
    return req


def _run_before(steps, scope):
    """Steps a request needs done before it starts (copies of its inputs to the host)."""
    if steps:
        with scope():
            for step in steps:
                step()


def before_blocking():
    """A blocking call starts: requests still in flight get the progress thread meanwhile.

    MPI lets a rank make a blocking collective while nonblocking ones are
    outstanding, and lets a peer wait for those first: this rank must post
    their next rounds while it sits in the blocking call (its agreement is a
    blocking ``Allgather``, which cannot match a peer's ``Iallgather``, so it
    cannot run in the engine). The thread stops again once no request is
    active (:func:`_auto_stop`). Without ``MPI_THREAD_MULTIPLE``, or with
    ``MPICOLL_PROGRESS=none``, no thread runs: progress then stays inside
    mpicoll's own waits (and such a program can deadlock).
    """
    if not _active or _thread.enabled() or not _thread.auto_allowed():
        return
    progress()                     # what already completed (a failed call's kept request) goes
    if _active:
        try:
            _thread.start(auto=True)
        except RuntimeError:
            pass


def _auto_stop():
    """Stop a progress thread :func:`before_blocking` started, once nothing is active."""
    if _thread.auto_started():
        with _lock:
            idle = not _active
        if idle:
            _thread.stop()


def _settle_now(call):
    """Finish a nonblocking call's agreement before it runs blocking."""
    before_blocking()
    if call.pending is not None:
        req, raw, mine = call.pending
        call.pending = None
        req.Wait()
        call.judge(raw, mine)


def empty_request(call, result):
    """The request of a call that moves nothing (zero elements everywhere, one rank)."""
    persistent = call.kind == "init"
    req = PersistentRequest(result) if persistent else Request(result)
    call.request = req
    if persistent:
        req._eager = lambda: None
        return req
    req._arm((), [])
    if call.pending is not None:
        req._agreement = call.pending + (call,)
        _activate(req)
    else:
        req._done = True
    return req


def waitall(requests):
    """Wait for every mpicoll request in ``requests``; return their results."""
    return [r.Wait() for r in requests]


def testall(requests):
    """True when every request in ``requests`` is complete (each advanced once)."""
    if not _thread.enabled():
        progress()
    return all(r.Test() for r in requests)
