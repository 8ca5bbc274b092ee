"""Monitored barrier: a barrier with a timeout that names the ranks that did not arrive.

Like ``torch.distributed.monitored_barrier``, built on point-to-point::

    from mpicoll.monitored import monitored_barrier, BarrierTimeoutError
    try:
        monitored_barrier(comm, timeout=30)
    except BarrierTimeoutError as exc:
        print(exc.missing)          # e.g. [3]

Rank 0 is the monitor. On entry it sends PRESENT to every rank and waits up
to ``timeout`` seconds for an ACK from each; a rank sends its ACK when it has
received PRESENT. The monitor then sends every rank the VERDICT (who
acknowledged). Every rank that took part raises :class:`BarrierTimeoutError`
with the same message naming the missing ranks; a rank that arrives late
finds the verdict waiting and raises it too. A rank that waits ``timeout``
seconds without hearing from the monitor withdraws (its ACK is never sent,
so the monitor counts it missing as well) and raises, naming rank 0.
Nothing can hang: every wait is bounded, and all messages travel on a private
duplicate of the communicator, one tag per barrier, so a late message never
matches another barrier or the caller's traffic.

The private duplicate is created by the first monitored barrier on a
communicator, with a nonblocking ``Idup`` waited on with the same timeout: if
a rank is missing at that very first call the error cannot name it (there is
no channel yet). Call ``monitored_barrier(comm)`` once where every rank is
known to be alive (start-up) to have later failures named.

Waiting polls with a short sleep (up to 10 ms), so it does not burn a core.
"""
import datetime
import math
import time

import numpy as np
from mpi4py import MPI

from .core.commcache import CommCache
from .core.errors import ArgumentError, ArgumentTypeError, describe

__all__ = ["monitored_barrier", "BarrierTimeoutError"]

_TAGS = 30000            # tags 1.._TAGS, one per barrier (mod _TAGS)
_PRESENT, _ACK = 1, 2


class BarrierTimeoutError(TimeoutError):
    """Some ranks did not reach :func:`monitored_barrier` in time.

    ``missing``: sorted list of the ranks that did not arrive (or, on a rank
    that never heard from the monitor, ``[0]``). ``timeout``: seconds.
    """

    def __init__(self, message, missing=(), timeout=None):
        super().__init__(message)
        self.missing = list(missing)
        self.timeout = timeout

    def __str__(self):
        return self.args[0]

    def __reduce__(self):
        return (type(self), (self.args[0], self.missing, self.timeout))


class _State:
    __slots__ = ("seq", "pending", "dup", "setup")

    def __init__(self):
        self.seq = 0
        self.pending = []        # (request, buffer): sends to ranks that may never receive
        self.dup = None          # the private channel, once MPI_Comm_idup has completed
        self.setup = None        # the MPI_Comm_idup request while it is pending


def _channel(comm, deadline):
    """The private duplicate of ``comm`` for monitored barriers; None if not ready by ``deadline``.

    Created with a nonblocking ``Idup`` (a collective: a blocking ``Dup`` would
    hang on the ranks that arrived if one is missing at the very first
    monitored barrier). A pending Idup is kept and completes when the missing
    ranks call ``monitored_barrier`` too. Cached on ``comm``; freed with it.
    """
    def start():
        state = _State()
        state.dup, state.setup = MPI.Intracomm(comm).Idup()
        return state
    state = _CACHE.get_or_create(comm, start)
    if state.setup is not None:
        if not _wait([state.setup], deadline)[0]:
            return None, state
        state.setup = None
    return state.dup, state


def _free(state):
    if not MPI.Is_finalized():
        for req, _ in state.pending:
            if req != MPI.REQUEST_NULL:
                req.Free()
        state.pending.clear()
        if state.setup is None and state.dup is not None:
            state.dup.Free()


#: The monitored barriers' private channel of each communicator, freed with it.
_CACHE = CommCache(on_free=_free)


def _seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if (isinstance(timeout, (bool, np.bool_))
            or not isinstance(timeout, (int, float, np.integer, np.floating))):
        raise ArgumentTypeError(
            f"timeout: expected seconds (a positive number) or a datetime.timedelta; "
            f"got {describe(timeout)}")
    timeout = float(timeout)
    if not math.isfinite(timeout) or timeout <= 0:
        raise ArgumentError(
            f"timeout: expected a positive, finite number of seconds; got {timeout}")
    return timeout


def _wait(requests, deadline):
    """Poll ``requests`` until all complete or ``deadline``; return the completed flags."""
    done = [r == MPI.REQUEST_NULL for r in requests]
    nap = 5e-5
    while True:
        for i, r in enumerate(requests):
            if not done[i] and r.Test():
                done[i] = True
        if all(done) or time.monotonic() >= deadline:
            return done
        time.sleep(nap)
        nap = min(nap * 2, 0.01)


def _cancel(req):
    """Cancel a pending receive; True if it was cancelled (False: it completed after all)."""
    if req == MPI.REQUEST_NULL:
        return False
    req.Cancel()
    status = MPI.Status()
    req.Wait(status)
    return status.Is_cancelled()


def _reap(state):
    state.pending = [(r, b) for r, b in state.pending if r != MPI.REQUEST_NULL and not r.Test()]


def _drain_stale(dup, tag):
    """Receive and drop messages left by earlier barriers (late ACKs, unreceived verdicts)."""
    status = MPI.Status()
    sources = range(1, dup.Get_size()) if dup.Get_rank() == 0 else (0,)
    for src in sources:
        # Messages from one source arrive in order: stop at the first current one.
        while dup.Iprobe(src, MPI.ANY_TAG, status):
            age = (tag - 1 - (status.Get_tag() - 1)) % _TAGS
            if not 0 < age < _TAGS // 2:
                break                        # this barrier's or a later one's
            scratch = bytearray(max(1, status.Get_count(MPI.BYTE)))
            dup.Recv([scratch, MPI.BYTE], src, status.Get_tag())


def _message(seq, missing, size, timeout, wait_all_ranks, note=""):
    named = missing if wait_all_ranks else missing[:1]
    ranks = ", ".join(str(r) for r in named)
    more = "" if wait_all_ranks or len(missing) == 1 else f" (and {len(missing) - 1} more)"
    count = "" if note else f", {size - len(missing)} of {size} ranks arrived"
    return (f"mpicoll.monitored_barrier: rank{'s' if len(named) > 1 else ''} {ranks}{more} "
            f"did not arrive within {timeout:g} s (barrier #{seq} on this communicator"
            f"{count}){note}")


def monitored_barrier(comm=None, timeout=30.0, wait_all_ranks=True):
    """Block until every rank of ``comm`` has arrived, or raise after ``timeout`` seconds.

    ``comm``: an intracommunicator (default COMM_WORLD). ``timeout``: seconds
    or a ``datetime.timedelta``. ``wait_all_ranks``: name every missing rank
    (default) or, like torch's default, only the first; ``missing`` on the
    exception always lists them all. Raises :class:`BarrierTimeoutError`
    on every rank that arrived (and on late ranks when they arrive).
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        raise ArgumentTypeError(
            f"comm: expected an mpi4py.MPI.Intracomm (e.g. MPI.COMM_WORLD); got {describe(comm)}",
            MPI.ERR_COMM)
    timeout = _seconds(timeout)
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1:
        return
    start = time.monotonic()
    dup, state = _channel(comm, start + timeout)
    seq = state.seq
    state.seq += 1
    if dup is None:
        raise BarrierTimeoutError(
            f"mpicoll.monitored_barrier: not every rank arrived within {timeout:g} s (barrier "
            f"#{seq}, the first on this communicator: its private channel could not be set "
            f"up, so the missing ranks are unknown; call monitored_barrier once at start-up "
            f"to have them named later)", [], timeout)
    tag = 1 + seq % _TAGS
    _reap(state)
    _drain_stale(dup, tag)
    if rank == 0:
        present = np.array([_PRESENT], dtype=np.int64)
        sends = [dup.Isend(present, r, tag) for r in range(1, size)]
        acks = np.zeros((size, 1), dtype=np.int64)
        recvs = [dup.Irecv(acks[r], r, tag) for r in range(1, size)]
        done = _wait(recvs, start + timeout)
        for i, req in enumerate(recvs):
            if not done[i] and not _cancel(req):
                done[i] = True               # the ACK landed while we cancelled
        verdict = np.ones(size, dtype=np.int8)
        verdict[1:] = done
        vsends = [dup.Isend(verdict, r, tag) for r in range(1, size)]
        # Ranks that acknowledged are receiving: their sends complete. The others
        # may never receive; keep those requests (and buffers) for later reaping.
        MPI.Request.Waitall([s for s, d in zip(sends, done, strict=True) if d])
        MPI.Request.Waitall([s for s, d in zip(vsends, done, strict=True) if d])
        for s, d in zip(sends, done, strict=True):
            if not d:
                state.pending.append((s, present))
        for s, d in zip(vsends, done, strict=True):
            if not d:
                state.pending.append((s, verdict))
        missing = [r for r in range(1, size) if not verdict[r]]
        if missing:
            raise BarrierTimeoutError(_message(seq, missing, size, timeout, wait_all_ranks),
                                      missing, timeout)
        return
    # Not the monitor: wait for PRESENT, acknowledge, wait for the verdict.
    got = np.zeros(1, dtype=np.int64)
    req = dup.Irecv(got, 0, tag)
    if not _wait([req], start + timeout)[0] and _cancel(req):
        raise BarrierTimeoutError(
            _message(seq, [0], size, timeout, True,
                     note="; rank 0 is the monitor, so the other ranks are not known"),
            [0], timeout)
    dup.Send(np.array([_ACK], dtype=np.int64), 0, tag)
    heard = time.monotonic()
    verdict = np.zeros(size, dtype=np.int8)
    req = dup.Irecv(verdict, 0, tag)
    # The monitor decides at most `timeout` after it sent PRESENT (before `heard`).
    if not _wait([req], heard + timeout + max(5.0, timeout))[0] and _cancel(req):
        raise BarrierTimeoutError(
            _message(seq, [0], size, timeout, True,
                     note="; rank 0 (the monitor) sent no verdict"), [0], timeout)
    missing = [r for r in range(size) if not verdict[r]]
    if missing:
        raise BarrierTimeoutError(_message(seq, missing, size, timeout, wait_all_ranks),
                                  missing, timeout)
