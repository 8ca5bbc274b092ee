"""The collective watchdog: a call that has not completed in time is reported, then ends the job.

Off by default. ``MPICOLL_TIMEOUT=SECONDS`` (read when a communicator is first used by
mpicoll) or :func:`set_timeout` (per communicator, collective) turn it on::

    mpicoll.set_timeout(MPI.COMM_WORLD, 120)              # report and MPI_Abort after 120 s
    mpicoll.set_timeout(comm, 30, action="raise")         # raise CollectiveTimeoutError instead

How it works. Each watched call (a blocking collective, ``Request.Wait`` of a
nonblocking or persistent one, a torch work's ``wait``) sets a per-process
record on entry -- its name, its communicator, a counter -- and clears it on
exit: three attribute writes, no MPI call, no clock read. A daemon thread
(``mpicoll-watchdog``) wakes every tick (a tenth of the shortest timeout, at most
0.5 s) and reads the record: a call it has seen in progress for half the timeout
(``MPICOLL_TIMEOUT_WARN``, a fraction) draws a warning naming the laggards, and
one still in progress at the timeout draws the report, on every rank that
waits, then ``MPI_Abort``.

Who is missing: every watched communicator has a second duplicate used only by
the watchdog threads. Each thread keeps a receive posted there for questions;
the thread of a rank that waits asks every peer (``Isend``, never a wait) and
reads the answers that come within a tick or two: a peer answers with how many
blocking collectives it has entered on the communicator and what it is doing now
(in this call, idle in the user's code, in another call). A peer that does not
answer is "not heard from": stopped (SIGSTOP, a debugger), dead or cut off. No
thread ever blocks on a peer: sends and receives are tested, and abandoned if
the job ends. Asking needs ``MPI_THREAD_MULTIPLE`` (mpi4py's default); without
it the report names no peers and says why.

The report names the primitive, the call's number on the communicator (blocking
calls counted by the watchdog, the same on every rank), the step the caller waits
in (read from the waiting thread's Python stack when the report is made: the
algorithm's send/receive and its peer, the agreement step, a node barrier of a
shared-memory algorithm), and each peer's state.

``action="raise"`` (or ``MPICOLL_TIMEOUT_ACTION=raise``): the waiting call raises
:class:`CollectiveTimeoutError` instead, and the communicator is marked unusable:
every later watched call on it raises at once. MPI cannot cancel what was posted:
the call's messages and its agreement's ``Iallgather`` stay posted (their buffers
are kept alive here, never freed), so the communicator must not be used again --
free it or end the program. Waits that poll in Python (``Request.Wait`` and torch
work objects, which poll while raise mode is on) raise at the timeout; a blocking
call sits inside one MPI call that cannot be interrupted without ULFM's
``MPIX_Comm_revoke`` (the MPICH wheel lacks it): if it has not returned a little
after the timeout, the watchdog aborts the job after all, and says so.

A rank cut off from the launcher (its link down) ends itself: if ``MPI_Abort``
has not ended the process 5 s after it was called, the watchdog calls ``os._exit``.
"""
import atexit
import ctypes
import os
import struct
import sys
import threading
import time

from mpi4py import MPI

from .env import getenv
from .errors import ArgumentError, describe

__all__ = ["CollectiveTimeoutError", "set_timeout", "get_timeout", "watched", "wait_request",
           "on_private_comm", "check_usable", "REC", "poll_deadline"]


class CollectiveTimeoutError(TimeoutError):
    """A collective did not complete within its communicator's timeout (``action="raise"``).

    ``operation`` (the call's name), ``call`` (its number among the blocking collectives on the
    communicator), ``missing``: the ranks that had not entered it or were not heard
    from, ``timeout``: seconds. The communicator is unusable afterwards.
    """

    def __init__(self, message, operation=None, call=None, missing=(), timeout=None):
        super().__init__(message)
        self.operation, self.call = operation, call
        self.missing, self.timeout = list(missing), timeout

    def __str__(self):
        return self.args[0]

    def __reduce__(self):
        return (type(self), (self.args[0], self.operation, self.call, self.missing, self.timeout))


class _Record:
    """What this process's thread waits in now (set on entry, cleared on exit)."""

    __slots__ = ("name", "ws", "n", "req")

    def __init__(self):
        self.name = None     # the watched call in progress (None: none)
        self.ws = None       # its communicator's _Watched, or None (not attached)
        self.n = 0           # watched calls entered (the monitor tells calls apart by it)
        self.req = None      # the request waited on (Request.Wait), for the report


#: True once any timeout is in force: the hooks' only test when the watchdog is off.
ON = False
REC = _Record()

_Q, _A = 1, 2                   # tags on the watchdog's own duplicate: questions, answers
_MSG = struct.Struct("<qqqqd40s")  # kind/qid, calls entered, state, asked call, seconds, name
_IDLE, _IN_THIS, _IN_OTHER = 0, 1, 2
_states = {}                    # communicator handle -> _Watched
_lock = threading.Lock()
_thread = None
_monitor = None
_stop = threading.Event()
_abandoned = []                 # requests of timed-out calls, kept alive (MPI still owns them)
_WORLD = MPI.COMM_WORLD.handle


def private_comm(comm):
    """The engine's private duplicate of ``comm`` (set by :mod:`mpicoll.engine.context`)."""
    raise RuntimeError("mpicoll.engine.context is not imported")


class _Watched:
    """One watched communicator: its timeout, its call count, the watchdog's channel."""

    __slots__ = ("timeout", "action", "calls", "wcomm", "size", "rank", "qbuf", "qreq",
                 "sends", "broken", "label", "world_ranks", "error")

    def __init__(self, comm, wcomm):
        self.timeout = None      # None: MPICOLL_TIMEOUT
        self.action = None       # None: MPICOLL_TIMEOUT_ACTION (abort)
        self.calls = 0           # blocking collectives entered on it (watched)
        self.wcomm = wcomm       # None: peers cannot be asked
        self.size, self.rank = comm.Get_size(), comm.Get_rank()
        self.qbuf = bytearray(_MSG.size)
        self.qreq = None
        self.sends = []          # answers and questions in flight (tested, never waited)
        self.broken = None       # the message of the timeout that made it unusable
        self.error = ()          # CollectiveTimeoutError's arguments after it
        self.label = "MPI_COMM_WORLD" if comm.handle == _WORLD else (
            comm.Get_name() or f"communicator of {self.size}")
        try:
            wg, g = MPI.COMM_WORLD.Get_group(), comm.Get_group()
            self.world_ranks = MPI.Group.Translate_ranks(g, list(range(self.size)), wg)
            g.Free()
            wg.Free()
        except MPI.Exception:
            self.world_ranks = None


# -- settings ------------------------------------------------------------------------------

def _env_timeout():
    text = getenv("MPICOLL_TIMEOUT", "")
    if not text or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise ArgumentError(f"MPICOLL_TIMEOUT: expected a number of seconds > 0 (0 or unset: "
                            f"off); got {text!r}") from None
    return value if value > 0 else None


def _env_action():
    text = getenv("MPICOLL_TIMEOUT_ACTION", "").strip().lower() or "abort"
    if text not in ("abort", "raise"):
        raise ArgumentError(f"MPICOLL_TIMEOUT_ACTION: expected 'abort' or 'raise'; got {text!r}")
    return text


def _warn_fraction():
    text = getenv("MPICOLL_TIMEOUT_WARN", "")
    try:
        value = float(text) if text.strip() else 0.5
    except ValueError:
        value = 0.5
    return value if 0 < value < 1 else None


def _timeout_of(ws):
    if ws is not None and ws.timeout is not None:
        return ws.timeout or None
    return _env_timeout()


def _action_of(ws):
    return ws.action if ws is not None and ws.action is not None else _env_action()


def set_timeout(comm, seconds, action=None):
    """Watch every collective on ``comm``: ``seconds`` (None: ``MPICOLL_TIMEOUT``; 0: off).

    ``action``: ``"abort"`` (report, then ``MPI_Abort``; the default, or
    ``MPICOLL_TIMEOUT_ACTION``) or ``"raise"`` (:class:`CollectiveTimeoutError` on every
    rank that waits; the communicator is unusable afterwards). Collective: call it on
    every rank of ``comm`` (it makes the watchdog's duplicate of the communicator the
    first time). Returns the previous (seconds, action).
    """
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or seconds != seconds or seconds < 0):
        raise ArgumentError(f"seconds: expected a number of seconds >= 0 (0: off) or None; got "
                            f"{describe(seconds)}")
    if action not in (None, "abort", "raise"):
        raise ArgumentError(f"action: expected 'abort', 'raise' or None; got {describe(action)}")
    comm = MPI.COMM_WORLD if comm is None else comm
    private_comm(comm)                 # collective, as this call is
    ws = _attach(comm)
    old = (ws.timeout, ws.action)
    ws.timeout = None if seconds is None else float(seconds)
    ws.action = action
    _start_if_needed()
    return old


def get_timeout(comm=None):
    """(seconds or None, action) in force for ``comm`` (default COMM_WORLD)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    ws = _states.get(comm.handle)
    return _timeout_of(ws), _action_of(ws)


def on_private_comm(comm, pcomm):
    """``comm`` got its private duplicate (collective): attach it if ``MPICOLL_TIMEOUT`` is set."""
    if _env_timeout() is not None:
        ws = _attach(comm)
        rec = REC
        if rec.name is not None and rec.ws is None and not rec.name.startswith("wait of"):
            rec.ws, ws.calls = ws, 1     # made by the first call on it: count that call
        _start_if_needed()


def _attach(comm):
    """The _Watched of ``comm``, made (collectively: a Dup) the first time."""
    ws = _states.get(comm.handle)
    if ws is None:
        wcomm = MPI.Intracomm(comm).Dup()
        ws = _Watched(comm, wcomm)
        _states[comm.handle] = ws
    return ws


def _start_if_needed():
    global ON, _thread, _monitor
    ON = True
    with _lock:
        if _thread is None or not _thread.is_alive():
            _monitor = _Monitor()
            _thread = threading.Thread(target=_monitor.loop, name="mpicoll-watchdog",
                                       daemon=True)
            _thread.start()
            atexit.register(_shutdown)   # before mpi4py finalizes MPI (registered earlier)


def _shutdown():
    """Stop the thread; cancel the receives it keeps posted (MPI_Finalize wants none)."""
    _stop.set()
    if _thread is not None:
        _thread.join(timeout=2.0)
    if MPI.Is_finalized():
        return
    pending = [ws.qreq for ws in _states.values() if ws.qreq is not None]
    pending += [req for _, _, req in (_monitor.recvs if _monitor is not None else [])]
    for req in pending:
        try:
            req.Cancel()
            req.Wait()
        except MPI.Exception:
            pass
    for ws in _states.values():
        ws.qreq = None


def check_usable(comm):
    """Raise :class:`CollectiveTimeoutError` if a timeout made ``comm`` unusable."""
    ws = _states.get(_handle(comm))
    if ws is not None and ws.broken:
        raise _refused(ws)


def _refused(ws):
    """The error of a call on a communicator a timeout made unusable."""
    _, name, calls, missing, timeout = ws.error
    return CollectiveTimeoutError(f"{ws.broken} (the communicator is unusable since)", name,
                                  calls, missing, timeout)


def _handle(comm):
    return _WORLD if comm is None else comm.handle


# -- the hooks -----------------------------------------------------------------------------

def watched(fn, name, comm, *args, **kwargs):
    """Run a blocking collective ``fn(*args)`` named ``name`` on ``comm`` under the watchdog.

    Called by the engine's hooks while :data:`ON` and no watched call is in progress
    (nested calls are part of the outer one).
    """
    rec = REC
    ws = _states.get(_handle(comm))
    if ws is not None:
        if ws.broken:
            raise _refused(ws)
        ws.calls += 1
    rec.ws = ws
    rec.name = name
    rec.n += 1
    try:
        return fn(*args, **kwargs)
    except _AsyncTimeout:
        raise (CollectiveTimeoutError(*ws.error) if ws is not None and ws.error
               else CollectiveTimeoutError("mpicoll: timed out")) from None
    finally:
        rec.name = None


def wait_request(req, comm=None, name=None, deadline=None):
    """``req.Wait()`` under the watchdog (``Request.Wait``'s hook).

    ``comm``/``name``: the call's (else the request's own ``_what``). In raise mode the
    wait polls (``Test``) so that it can raise; ``deadline`` (a ``time.monotonic()``
    value) bounds it as well, whatever the mode (torch's ``Work.wait(timeout)``).
    """
    what = getattr(req, "_what", None)
    if what is not None:
        name = name or what[0]
        comm = comm if comm is not None else what[1]
    ws = _states.get(_handle(comm)) if comm is not None else None
    if ws is not None and ws.broken:
        raise _refused(ws)
    rec = REC
    rec.ws, rec.req = ws, req
    rec.name = "wait of " + (name or "a request")
    rec.n += 1
    try:
        if deadline is None and _action_of(ws) != "raise":
            return req.Wait()
        return poll_deadline(req, ws, deadline, name)
    finally:
        rec.name = None
        rec.req = None


def poll_deadline(req, ws, deadline, name):
    """Test ``req`` until it completes; raise at ``deadline`` or once the watchdog marks ``ws``."""
    polls = 0
    while not req.Test():
        if ws is not None and ws.broken:
            abandon(req)
            raise CollectiveTimeoutError(*ws.error)
        if deadline is not None and time.monotonic() >= deadline:
            abandon(req)
            msg = f"mpicoll: Timed out waiting for {name or 'a request'} (its wait's timeout)"
            raise CollectiveTimeoutError(msg, name)
        polls += 1
        if polls < 64:
            os.sched_yield()
        else:
            time.sleep(50e-6)
    return req.result if hasattr(req, "result") else None


def abandon(req):
    """Take a request that timed out out of the progress engine; keep what MPI still owns alive."""
    _abandoned.append(req)
    req._failed = True
    req._done = True        # the progress engine drops it from its active list


class _AsyncTimeout(BaseException):
    """Set in the waiting thread (raise mode) when it is back in Python code."""


# -- the monitor thread --------------------------------------------------------------------

class _Monitor:
    """The watchdog thread: reads the record every tick, answers and asks peers."""

    def __init__(self):
        self.multiple = MPI.Query_thread() >= MPI.THREAD_MULTIPLE
        self.seen = -1           # REC.n of the call being timed
        self.since = 0.0
        self.warned = self.fired = False
        self.qid = 0
        self.answers = {}        # rank -> (calls, state, secs, name) for the current question
        self.recvs = []          # (rank, buffer, request) answers expected

    def loop(self):
        while not _stop.wait(self._tick()):
            try:
                self._serve()
                self._watch()
            except Exception as exc:
                sys.stderr.write(f"[mpicoll watchdog] internal error: {exc!r}\n")

    def _tick(self):
        ts = [t for t in [_env_timeout_safe()] + [w.timeout for w in list(_states.values())] if t]
        return min(0.5, max(0.02, min(ts) / 10)) if ts else 0.5

    # answers to peers' questions
    def _serve(self):
        if not self.multiple:
            return
        rec = REC
        for ws in list(_states.values()):
            if ws.wcomm is None or ws.wcomm == MPI.COMM_NULL:
                continue
            while True:
                if ws.qreq is None:
                    ws.qreq = ws.wcomm.Irecv([ws.qbuf, MPI.BYTE], MPI.ANY_SOURCE, _Q)
                status = MPI.Status()
                if not ws.qreq.Test(status):
                    break
                ws.qreq = None
                src = status.Get_source()
                qid = _MSG.unpack(bytes(ws.qbuf))[0]
                inside = rec.name
                state = _IDLE if inside is None else (_IN_THIS if rec.ws is ws else _IN_OTHER)
                secs = time.monotonic() - self.since if inside is not None else 0.0
                out = bytearray(_MSG.pack(qid, ws.calls, state, 0, secs,
                                          (inside or "").encode()[:40]))
                ws.sends.append((ws.wcomm.Isend([out, MPI.BYTE], src, _A), out))
            ws.sends = [(r, b) for r, b in ws.sends if not r.Test()]

    # timing the call in progress
    def _watch(self):
        rec = REC
        name, n, ws = rec.name, rec.n, rec.ws
        now = time.monotonic()
        if name is None:
            self.seen = -1
            return
        if n != self.seen:
            self.seen, self.since = n, now
            self.warned = self.fired = False
            self.answers = {}
            return
        timeout = _timeout_of(ws)
        if not timeout or self.fired:
            return
        waited = now - self.since
        self._collect()
        frac = _warn_fraction()
        if frac and not self.warned and waited >= frac * timeout:
            self.warned = True
            self._ask(ws)
            self._settle(ws, self._grace())
            _say(self._report(ws, name, waited, timeout, warning=True))
        if waited >= timeout:
            self.fired = True
            self._ask(ws)
            self._settle(ws, self._grace())
            report = self._report(ws, name, time.monotonic() - self.since, timeout)
            if _action_of(ws) == "raise":
                self._raise(ws, report, n)
            else:
                _end(report)

    def _grace(self):
        """Seconds to wait for the peers' answers: their threads look every tick."""
        return min(1.5, 2 * self._tick() + 0.1)

    def _ask(self, ws):
        if ws is None or ws.wcomm is None or not self.multiple:
            return
        self.qid += 1
        self.answers = {}
        q = bytearray(_MSG.pack(self.qid, ws.calls, 0, 0, 0.0, b""))
        for r in range(ws.size):
            if r == ws.rank:
                continue
            buf = bytearray(_MSG.size)
            try:
                self.recvs.append((r, buf, ws.wcomm.Irecv([buf, MPI.BYTE], r, _A)))
                ws.sends.append((ws.wcomm.Isend([q, MPI.BYTE], r, _Q), q))
            except MPI.Exception:
                pass

    def _collect(self):
        """Read the answers that came in (answers to an older question are dropped)."""
        keep = []
        for r, buf, req in self.recvs:
            try:
                done = req.Test()
            except MPI.Exception:
                continue
            if not done:
                keep.append((r, buf, req))
                continue
            qid, calls, state, _, secs, name = _MSG.unpack(bytes(buf))
            if qid == self.qid:
                self.answers[r] = (calls, state, secs, name.rstrip(b"\0").decode())
        self.recvs = keep

    def _settle(self, ws, grace):
        """Read answers for up to ``grace`` seconds (serving questions meanwhile)."""
        end = time.monotonic() + grace
        want = 0 if ws is None or ws.wcomm is None or not self.multiple else ws.size - 1
        while len(self.answers) < want and time.monotonic() < end:
            self._serve()
            self._collect()
            time.sleep(0.01)

    def _report(self, ws, name, waited, timeout, warning=False):
        rank = MPI.COMM_WORLD.Get_rank()
        calls = ws.calls if ws is not None else None
        where = ws.label if ws is not None else "its communicator"
        head = (f"mpicoll watchdog: {name} (blocking collective #{calls} on {where})"
                if calls is not None and not name.startswith("wait of") else
                f"mpicoll watchdog: {name} on {where}")
        verb = (f"has waited {waited:.1f} s of its {timeout:g} s timeout" if warning else
                f"Timed out after {waited:.1f} s (timeout {timeout:g} s)")
        lines = [f"{head} {verb}", f"  waiting in: {_step_text()}"]
        missing = []
        if ws is None:
            lines.append("  peers: not asked (the communicator was not attached to the watchdog:"
                         " set the timeout with MPICOLL_TIMEOUT or set_timeout on every rank)")
        elif not self.multiple:
            lines.append("  peers: not asked (MPI was not initialised with MPI_THREAD_MULTIPLE)")
        else:
            silent, behind, inside, past = [], [], [], []
            for r in range(ws.size):
                if r == ws.rank:
                    continue
                a = self.answers.get(r)
                who = _who(ws, r)
                if a is None:
                    silent.append(who)
                    missing.append(r)
                    continue
                c, state, secs, what = a
                now = ("idle in its own code" if state == _IDLE else
                       f"in {what} on this communicator for {secs:.1f} s" if state == _IN_THIS
                       else f"in {what} on another communicator for {secs:.1f} s")
                if name.startswith("wait of"):
                    if state == _IN_THIS:
                        inside.append(who)
                    else:
                        behind.append(f"{who} (now {now})")
                        missing.append(r)
                elif c < calls:
                    behind.append(f"{who} (entered {c} blocking collectives here; now {now})")
                    missing.append(r)
                elif c == calls and state == _IN_THIS:
                    inside.append(who)
                else:
                    past.append(f"{who} ({c} calls; now {now})")
            if behind:
                lines.append("  have not entered this call: " + "; ".join(behind))
            if silent:
                lines.append("  not heard from (stopped, dead or cut off): " + ", ".join(silent))
            if inside:
                lines.append("  in this call too: " + ", ".join(inside))
            if past:
                lines.append("  past this call: " + "; ".join(past))
        self.missing = missing
        text = "\n".join(lines)
        report = "".join(f"[rank {rank}] {line}\n" for line in text.splitlines())
        return report, missing, name, calls

    def _raise(self, ws, report, n):
        text, missing, name, calls = report
        _say(report)
        msg = text.strip().splitlines()[0].split("] ", 1)[1]
        extra = [ln.split("] ", 1)[1].strip() for ln in text.strip().splitlines()[2:]]
        msg = msg + (" - " + "; ".join(extra) if extra else "")
        if ws is not None:
            ws.error = (msg, name, calls, missing, _timeout_of(ws))
            ws.broken = msg
        target = next((t for t, f in sys._current_frames().items()
                       if t != threading.get_ident() and _in_watched(f)), None)
        if REC.req is not None:
            return                     # the wait polls: it sees ws.broken and raises
        if target is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target),
                                                       ctypes.py_object(_AsyncTimeout))
        end = time.monotonic() + max(2.0, 3 * self._tick())
        while time.monotonic() < end:
            if REC.n != n or REC.name is None:
                return
            time.sleep(0.02)
        _end((text + f"[rank {MPI.COMM_WORLD.Get_rank()}] the call is a blocking one, inside "
              f"an MPI call that cannot be interrupted (no MPIX_Comm_revoke here): ending the "
              f"job instead of raising\n", missing, name, calls))


def _env_timeout_safe():
    try:
        return _env_timeout()
    except ArgumentError:
        return None


def _who(ws, r):
    if ws.world_ranks is None or ws.label == "MPI_COMM_WORLD":
        return f"rank {r}"
    return f"rank {r} (world rank {ws.world_ranks[r]})"


def _say(report):
    sys.stderr.write(report[0])
    sys.stderr.flush()


def _end(report):
    """Print the report and end the job (MPI_Abort; _exit if that does not end this process)."""
    text = report[0]
    _say(report)
    rank = MPI.COMM_WORLD.Get_rank()
    sys.stderr.write(f"[rank {rank}] mpicoll watchdog: ending the job (MPI_Abort)\n")
    sys.stderr.flush()
    del text

    def hard_exit():
        time.sleep(5.0)
        os._exit(124)
    threading.Thread(target=hard_exit, daemon=True).start()
    time.sleep(0.5)        # let other ranks' watchdogs print their reports too
    try:
        MPI.COMM_WORLD.Abort(124)
    finally:
        os._exit(124)


def _in_watched(frame):
    while frame is not None:
        if frame.f_code.co_filename == __file__ and frame.f_code.co_name in (
                "watched", "wait_request"):
            return True
        frame = frame.f_back
    return False


def _step_text():
    """Where the watched thread waits, read from its Python stack."""
    me = threading.get_ident()
    for tid, frame in sys._current_frames().items():
        if tid != me and _in_watched(frame):
            return _describe(frame)
    return "unknown"


def _describe(frame):
    innermost = None
    f = frame
    while f is not None:
        code = f.f_code
        path = code.co_filename.replace(os.sep, "/")
        if "/mpicoll/" in path and innermost is None and "/core/watchdog" not in path:
            innermost = f"{path.rsplit('/mpicoll/', 1)[1]}:{f.f_lineno} ({code.co_name})"
        loc = f.f_locals
        if code.co_name in ("execute", "_execute_on_device") and "step" in loc:
            steps = loc.get("steps") or getattr(loc.get("self"), "steps", ())
            program = getattr(loc.get("self"), "program", None)
            return _step_of(loc["step"], steps, what=getattr(program, "what", None))
        if code.co_name == "run" and path.endswith("engine/program.py") and "step" in loc:
            program = loc.get("self")
            return _step_of(loc["step"], program.steps, what=program.what)
        if code.co_name == "allgather" and path.endswith("engine/call.py"):
            return "the agreement step (the fingerprint Allgather on the private communicator)"
        if code.co_name == "run" and path.endswith("engine/memo.py") and "mine" in loc:
            return "the agreement step (the fingerprint Allgather on the private communicator)"
        if path.endswith("device/peer_memory.py"):
            return ("a node barrier of a shared-memory algorithm "
                    f"(mpicoll/device/peer_memory.py:{f.f_lineno})")
        req = loc.get("self")
        what = getattr(getattr(req, "_compiled", None), "what", None)
        if code.co_name == "Wait" and "blocking" in loc and "i" in loc:   # a program alone
            return _step_of(loc["blocking"][loc["i"]], loc["blocking"], what=what)
        if code.co_name == "Wait" and hasattr(req, "_pc") and hasattr(req, "_steps"):
            if getattr(req, "_agreement", None) is not None:
                return "the agreement step (the fingerprint Iallgather of the request)"
            return _step_of(req._steps[req._pc] if req._pc < len(req._steps) else None,
                            req._steps, req, what)
        f = f.f_back
    return innermost or "unknown"


def _step_of(step, steps, req=None, what=None):
    try:
        i = list(steps).index(step) + 1
        at = f"step {i} of {len(steps)}: "
    except ValueError:
        at = ""
    if what and id(step) in what:          # a compiled program's start or wait, in words
        return at + what[id(step)]
    fn = getattr(step, "func", None)
    args = getattr(step, "args", ())
    name = getattr(fn, "__name__", None) or type(step).__name__
    if isinstance(step, tuple) and req is not None:
        return at + "waiting for the messages of this round"
    if name in ("Recv", "Irecv") and len(args) > 1:
        return at + f"Recv from rank {args[1]}"
    if name in ("Send", "Isend") and len(args) > 1:
        return at + f"Send to rank {args[1]}"
    if name == "Sendrecv" and len(args) > 4:
        return at + f"Sendrecv (send to rank {args[1]}, receive from rank {args[4]})"
    if name in ("_wait_slots",):
        return at + "waiting for posted messages (Waitall)"
    return at + name


# MPICOLL_TIMEOUT set at start: watch from the first call (it makes the private communicator).
ON = _env_timeout_safe() is not None
