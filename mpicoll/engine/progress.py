"""The optional progress thread (``MPICOLL_PROGRESS=thread``): overlap while the caller computes.

Without it, a nonblocking mpicoll collective advances only inside mpicoll
calls (``Test``, ``Wait``, ``waitall``...): between them, only the round
already posted moves. With it, one daemon thread per process advances every
active request as soon as any of its MPI requests completes: it polls the
pending requests plus a wake-up generalized request (``MPI_Grequest``) that
the caller completes when it starts a new request, yielding the core
between polls and then napping 50 µs (:func:`wait_any`), and sleeps on a
Python event while no request is active, so it costs no CPU while nothing
moves. ``Wait`` then only waits for the
thread to finish the request, and no two threads ever wait on one MPI
request.

The thread also starts on its own, for as long as requests are active,
when a *blocking* mpicoll call is made while some are in flight (MPI lets
peers wait for those first; ``MPICOLL_PROGRESS=none`` forbids it).

Needs ``MPI_THREAD_MULTIPLE`` (mpi4py asks for it by default); without it
the thread is refused with the reason and progress stays in the caller.
"""
import atexit
import os
import threading
import time

from mpi4py import MPI

from ..core.env import getenv

__all__ = ["enabled", "start", "stop", "wake", "wanted", "wait_any", "auto_allowed",
           "auto_started"]

_thread = None
_auto = False              # the running thread was started for a blocking call (see start)
_atexit = False            # stop() is registered with atexit
_stop = False
_wake_lock = threading.Lock()
_wake_req = None           # the generalized request the thread also waits on
_woken = False             # _wake_req was completed; the thread makes a new one
_idle = threading.Event()  # set by wake(): lets an idle thread sleep outside MPI


def wanted():
    """True when ``MPICOLL_PROGRESS`` asks for the progress thread."""
    value = getenv("MPICOLL_PROGRESS", "")     # read at every Start: the cheap way
    if not value:
        return False
    value = value.strip().lower()
    if value in ("", "none", "off", "caller", "0"):
        return False
    if value in ("thread", "on", "1"):
        return True
    raise ValueError(f"MPICOLL_PROGRESS: expected 'thread' or 'none'; got {value!r}")


def auto_allowed():
    """False when ``MPICOLL_PROGRESS`` says ``none``.

    No thread then, not even for a blocking call made while requests are in flight: see
    :func:`mpicoll.engine.nonblocking.before_blocking`.
    """
    return getenv("MPICOLL_PROGRESS", "").strip().lower() not in (
        "none", "off", "caller", "0")


def enabled():
    """True while the progress thread runs."""
    return _thread is not None and _thread.is_alive()


def start(engine=None, auto=False):
    """Start the progress thread (idempotent); raise RuntimeError without MPI_THREAD_MULTIPLE.

    ``engine``: ``(advance, pending)`` — advance every active request once, and
    list the MPI requests they wait on now (default: :mod:`.nonblocking`'s).
    ``auto``: started for a blocking call made while requests are in flight;
    :func:`auto_started` tells, and the engine stops it once they are done.
    """
    global _thread, _stop, _wake_req, _woken, _auto, _atexit
    if enabled():
        return
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise RuntimeError(
            "MPICOLL_PROGRESS=thread needs MPI_THREAD_MULTIPLE; MPI was initialised with a lower "
            "thread level (mpi4py.rc.thread_level)")
    _stop = False
    _wake_req, _woken = MPI.Grequest.Start(), False
    if engine is None:
        engine = _default_engine
    _auto = auto
    _thread = threading.Thread(target=_loop, args=engine, name="mpicoll-progress", daemon=True)
    _thread.start()
    if not _atexit:
        atexit.register(stop)     # before mpi4py finalizes MPI (it does so after atexit)
        _atexit = True


def auto_started():
    """True while a thread started by :func:`start` with ``auto`` runs."""
    return _auto and enabled()


def stop():
    """Stop the progress thread (it finishes what it is doing first)."""
    global _stop, _thread
    if not enabled():
        return
    _stop = True
    wake()
    _thread.join()
    _thread = None


def wake():
    """Make the thread look at the active requests again (a new one was started)."""
    global _woken
    with _wake_lock:
        _idle.set()
        if _wake_req is not None and not _woken:
            _woken = True
            _wake_req.Complete()


_default_engine = None     # set by .nonblocking, which imports this module (not the reverse)


def _loop(advance, pending_requests):
    global _wake_req, _woken
    while True:
        with _wake_lock:
            if _woken:
                _wake_req.Wait()             # complete: frees it
                if _stop:
                    _wake_req = None
                    return
                _wake_req, _woken = MPI.Grequest.Start(), False
            wake_req = _wake_req
        advance()
        pending = pending_requests()
        if not pending:
            # Nothing in flight: sleep on a Python event, not in MPI (whose
            # waits poll and would keep a core busy between collectives).
            _idle.wait()
            _idle.clear()
            continue
        wait_any(pending + [wake_req], _SPINS)


#: Polls that yield the core before the progress thread sleeps between polls.
_SPINS = 64
_NAP_S = 50e-6


def wait_any(requests, spins=None):
    """Return once one of ``requests`` has completed (at once if there are none).

    Not ``MPI_Waitany``: MPICH's Waitany and Waitsome never yield the core,
    so with more ranks (and progress threads) than cores a waiter spinning
    there keeps the ranks it waits for off the CPU (MPICH 5.0.2, 3 ranks on
    2 cores: 7.9 ms for an Iallgather + Waitany, 0.04 ms with Wait or
    Waitall, whose blocking loop yields; benchmarks/oversubscribed/README.md).
    Testany with ``sched_yield`` between polls costs what Wait costs; after
    ``spins`` polls (None: never) it naps 50 µs between polls instead,
    leaving the core — and the GIL — to the computation the progress thread
    is there to overlap with.
    """
    if not requests:
        return
    polls = 0
    while True:
        if MPI.Request.Testany(requests)[1]:
            return
        if spins is None or polls < spins:
            polls += 1
            _yield()
        else:
            time.sleep(_NAP_S)


_yield = getattr(os, "sched_yield", lambda: None)
