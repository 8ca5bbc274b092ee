"""The process group's ``monitored_barrier(timeout, wait_all_ranks)``, with gloo's reports.

torch's ``dist.monitored_barrier`` is gloo-only, but a process group's own
``monitored_barrier`` method is called directly (torch's suite does, with
``timedelta(0)``). This runs :func:`mpicoll.monitored_barrier` and reports a
timeout as gloo does, as a ``RuntimeError`` (:class:`MonitoredBarrierError`,
also an :class:`mpicoll.BarrierTimeoutError`): rank 0 names the ranks that
did not arrive (the first of them, or all with ``wait_all_ranks``), the
other ranks say they arrived but heard no verdict from rank 0.

A zero (or negative) timeout leaves no time to hear from any rank, so nothing
is sent: every calling rank raises at once, rank 0 naming every other rank as
not heard from (gloo's rank 0 raises the same way; its other ranks may then
wait for rank 0 until the group's timeout).
"""
import datetime

import torch.distributed as dist

import mpicoll

__all__ = ["MonitoredBarrierError", "monitored_barrier"]

#: torch's default for a monitored barrier without a timeout (the default group timeout).
DEFAULT_TIMEOUT_S = 1800.0


class MonitoredBarrierError(mpicoll.BarrierTimeoutError, dist.DistBackendError):
    """Ranks did not reach the process group's monitored barrier in time.

    A ``RuntimeError`` (torch's ``DistBackendError``), as gloo raises, and an
    :class:`mpicoll.BarrierTimeoutError` (``missing``, ``timeout``).
    """


def _seconds(timeout):
    if timeout is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return timeout                 # seconds; mpicoll.monitored_barrier names a bad type


def _ranks(missing, wait_all_ranks):
    if wait_all_ranks and len(missing) > 1:
        return "Ranks " + ", ".join(str(r) for r in missing)
    return f"Rank {missing[0]}"


def monitored_barrier(comm, timeout=None, wait_all_ranks=False):
    """Block until every rank of ``comm`` arrives, or raise :class:`MonitoredBarrierError`.

    ``timeout``: a ``timedelta`` or seconds (None: 30 minutes, torch's default); zero
    raises at once on every calling rank.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    seconds = _seconds(timeout)
    if size == 1:
        return
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds <= 0:
        # (NaN and other bad values go on to mpicoll's check, which names them)
        ms = 0
        missing = list(range(1, size))
        if rank == 0:
            raise MonitoredBarrierError(
                f"[Rank 0]: {_ranks(missing, wait_all_ranks)} failed to pass monitoredBarrier "
                f"in {ms} ms: Rank 0 timed out in monitoredBarrier after {ms} ms (a zero "
                f"timeout leaves no time to hear from any rank)", missing, 0.0)
        raise MonitoredBarrierError(
            f"Rank {rank} timed out in monitoredBarrier after {ms} ms (a zero timeout leaves "
            f"no time to hear from rank 0)", [0], 0.0)
    try:
        mpicoll.monitored_barrier(comm, timeout=seconds, wait_all_ranks=wait_all_ranks)
    except MonitoredBarrierError:
        raise
    except mpicoll.BarrierTimeoutError as exc:
        ms = int(round(exc.timeout * 1000)) if exc.timeout is not None else 0
        if rank == 0 and exc.missing:
            text = (f"[Rank 0]: {_ranks(exc.missing, wait_all_ranks)} failed to pass "
                    f"monitoredBarrier in {ms} ms ({exc})")
        elif rank == 0:
            text = f"Rank 0 timed out in monitoredBarrier after {ms} ms ({exc})"
        else:
            text = (f"Rank {rank} successfully reached monitoredBarrier, but received errors "
                    f"while waiting for send/recv from rank 0 ({exc})")
        raise MonitoredBarrierError(text, exc.missing, exc.timeout) from exc
