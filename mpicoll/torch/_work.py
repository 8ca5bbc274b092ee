"""The work objects the backend's calls return (``torch.distributed.Work`` subclasses).

- :class:`Done`: a call that completed before it returned (blocking calls,
  ``async_op=False``): ``wait()`` returns at once.
- :class:`Pending`: a call in flight (``async_op=True``; isend/irecv): an
  mpicoll request or MPI requests, and the steps that finish the call once its
  messages are in (copies into list outputs, AVG's division). ``wait()`` and
  ``is_completed()`` advance it (mpicoll's progress engine, or MPI's);
  ``get_future()`` completes the call, then gives a completed future whose
  value is the output tensors: nothing would complete a future left pending
  (DDP waits on it from C++, where no mpicoll progress runs), so asking for
  the future is a wait.
"""
import threading
import time

import torch
import torch.distributed as dist
from mpi4py import MPI

from ..core import watchdog as _watchdog

__all__ = ["Done", "Pending"]

#: Seconds past a group's timeout that a wait gives the watchdog's report (it asks the peers
#: at the timeout and waits up to a fraction of it for their answers) before giving up alone.
_REPORT_S = 2.5


def _future(value):
    fut = torch.futures.Future()
    fut.set_result(value)
    return fut


class Done(dist.Work):
    """A completed call; its future's value is ``result`` (the output tensors)."""

    def __init__(self, result=None, source=-1):
        super().__init__()
        self._result = result
        self._source = source

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._result if isinstance(self._result, list) else []

    def get_future(self):
        return _future(self._result)

    def _source_rank(self):
        return self._source

    def source_rank(self):
        return self._source

    def synchronize(self):
        pass


class Pending(dist.Work):
    """A call in flight: an mpicoll request (``Wait``/``Test``) or a list of MPI requests.

    ``finish``: called once the messages are in (copies out, AVG's division).
    ``status``: for an irecv from any source, the ``MPI.Status`` that names it.
    """

    def __init__(self, request, result=None, finish=None, status=None, deadline=None,
                 explain=None):
        super().__init__()
        self._explain = explain      # exc -> exc: adds what the request's error cannot carry
        # deadline: (seconds from now, what the call is, called with the message on timeout)
        self._deadline = None
        if deadline is not None:
            seconds, self._what, self._on_timeout = deadline
            self._seconds = seconds
            self._deadline = time.monotonic() + seconds
        self._request = request
        self._result = result
        self._finish = finish
        self._status = status
        self._done = False
        self._error = None
        self._lock = threading.Lock()

    # -- completion -----------------------------------------------------------
    def _complete(self):
        """Run the finishing steps once."""
        self._done = True
        try:
            if self._finish is not None:
                self._finish()
        except BaseException as exc:
            self._error = exc

    def _wait(self, timeout=None):
        req = self._request
        deadline = self._deadline
        if timeout is not None:
            seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
            if seconds and seconds > 0:
                mine = time.monotonic() + seconds
                deadline = mine if deadline is None else min(deadline, mine)
        if deadline is not None and not isinstance(req, list):
            group = self._deadline == deadline
            try:
                # The group's own deadline: its communicator is watched (set_timeout, raise),
                # whose report, due at the timeout, names the missing ranks; the deadline here
                # (a little later) is the backstop.
                _watchdog.wait_request(req, deadline=deadline + (_REPORT_S if group else 0.0))
            except _watchdog.CollectiveTimeoutError as exc:
                waited = self._seconds if group else seconds
                why = ("some rank of the group has not made the call, or is stopped or gone"
                       if not exc.missing else
                       "; ".join(p.strip() for p in str(exc).split(" - ", 1)[1:]))
                msg = (f"mpicoll: Timed out after {waited:g} s waiting for "
                       f"{getattr(self, '_what', 'a call')} to complete: {why}")
                if getattr(self, "_on_timeout", None) is not None:
                    self._on_timeout(msg)
                raise dist.DistBackendError(msg) from None
            return
        if isinstance(req, list):
            MPI.Request.Waitall(req, self._status)
        else:
            req.Wait()

    def _test(self):
        req = self._request
        if isinstance(req, list):
            return MPI.Request.Testall(req, self._status)
        return req.Test()

    def wait(self, timeout=None):
        with self._lock:
            if not self._done:
                try:
                    self._wait(timeout)
                except BaseException as exc:
                    if self._explain is not None:
                        exc = self._explain(exc)
                    self._error = exc
                    self._done = True
                    raise exc from None
                self._complete()
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        with self._lock:
            if not self._done:
                try:
                    done = self._test()
                except BaseException as exc:
                    self._error = exc
                    self._done = True
                    raise
                if done:
                    self._complete()
            return self._done

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._result if isinstance(self._result, list) else []

    def get_future(self):
        self.wait()
        return _future(self._result)

    def _source_rank(self):
        self.wait()
        return self._status[0].Get_source() if self._status else -1

    def source_rank(self):
        return self._source_rank()

    def synchronize(self):
        self.wait()
