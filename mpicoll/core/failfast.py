"""Fail fast: a rank that raises ends the whole MPI job instead of leaving the others waiting.

Entry points (demo, bench, examples) wrap their main in :func:`run_main`::

    if __name__ == "__main__":
        run_main(main)

On an uncaught exception the failing rank prints its traceback once (prefixed
with its rank) and calls ``MPI_Abort`` on COMM_WORLD, so ``mpiexec`` ends all
ranks with a non-zero exit within seconds, as ``python -m mpi4py`` does.
``SystemExit`` with a non-zero code aborts the same way, without a traceback.
"""
import sys
import traceback

__all__ = ["run_main", "abort_on_error"]


def _abort(code):
    import time

    from mpi4py import MPI
    sys.stdout.flush()
    sys.stderr.flush()
    time.sleep(1.0)   # let the launcher forward the last output before the kill
    MPI.COMM_WORLD.Abort(code)


def abort_on_error(exc, code=1):
    """Print ``exc`` with the rank and abort the job (never returns when size > 1)."""
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.Get_rank() if MPI.Is_initialized() and not MPI.Is_finalized() else 0
    text = "".join(traceback.format_exception(exc))
    sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.rstrip().splitlines()))
    sys.stderr.flush()
    if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
        _abort(code)
    raise SystemExit(code)


def run_main(main, *args, **kwargs):
    """Call ``main``; on any failure on any rank, end the whole job with a non-zero exit."""
    try:
        rc = main(*args, **kwargs)
    except SystemExit as exc:
        code = exc.code
        if code in (None, 0):
            raise
        if not isinstance(code, int):
            sys.stderr.write(f"{code}\n")
            code = 2
        from mpi4py import MPI
        if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
            _abort(code)
        raise SystemExit(code) from None
    except BaseException as exc:  # any failure must end the job
        abort_on_error(exc)
    if rc:
        raise SystemExit(rc)
