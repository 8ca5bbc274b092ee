"""Start an mpicoll program so that one rank's failure ends the whole job.

Usage (every rank runs it)::

    mpirun -n 4 python -m mpicoll.run script.py [args...]
    mpirun -n 4 python -m mpicoll.run -m package.module [args...]
    mpirun -n 4 python -m mpicoll.run -c "import mpicoll; ..."
    mpirun -n 4 python -m mpicoll.run --timeout 600 script.py    # also watch every collective

The program runs as ``__main__`` (``sys.argv`` as Python would set it). If any
rank raises an uncaught exception (or exits with a non-zero status), that rank
prints its traceback once, prefixed with its rank, and calls ``MPI_Abort``:
``mpirun`` ends every rank within about a second and a half, with a non-zero
exit, instead of leaving the others waiting in their next collective forever.
``python -m mpi4py script.py`` gives the same guarantee without the rank prefix.

``--timeout SECONDS`` sets ``MPICOLL_TIMEOUT`` for the program: a collective
that has not completed in that time is reported and ends the job
(:mod:`mpicoll.core.watchdog`). In a script of your own you may instead wrap
the main function: ``mpicoll.run.main_guarded(main)``.
"""
import os
import runpy
import sys

from .core import watchdog
from .core.failfast import run_main

__all__ = ["main", "main_guarded"]

_USAGE = ("usage: python -m mpicoll.run [--timeout SECONDS] (script.py | -m module | -c code) "
          "[args...]")
#: ``--help``'s text, plain (the module docstring is reST, for the documentation)
_HELP = f"""{_USAGE}

Start an mpicoll program (on every rank) so that one rank's failure ends the whole job:
a rank that raises an uncaught exception, or exits with a non-zero status, prints its
traceback once, prefixed with its rank, and calls MPI_Abort, so mpirun ends every rank
within about a second and a half instead of leaving the others waiting forever.

options:
  --timeout SECONDS  also report, and end the job on, a collective that has not completed
                     in that time (sets MPICOLL_TIMEOUT)
  --help             show this help and exit

examples:
  mpirun -n 4 python -m mpicoll.run script.py [args...]
  mpirun -n 4 python -m mpicoll.run -m package.module [args...]
  mpirun -n 4 python -m mpicoll.run -c "import mpicoll; ..."
  mpirun -n 4 python -m mpicoll.run --timeout 600 script.py"""


def main_guarded(fn, *args, **kwargs):
    """Call ``fn(*args, **kwargs)``; any failure on any rank ends the whole MPI job."""
    return run_main(fn, *args, **kwargs)


def _parse(argv):
    """(kind, target, rest, timeout) from this module's command line; SystemExit(2) on junk."""
    timeout = None
    i = 0
    while i < len(argv) and (argv[i].startswith("--") or argv[i] == "-h"):
        opt = argv[i]
        if opt in ("--help", "-h"):
            print(_HELP)
            raise SystemExit(0)
        if opt == "--timeout" or opt.startswith("--timeout="):
            value = opt.partition("=")[2] if "=" in opt else (argv[i + 1] if i + 1 < len(argv)
                                                               else "")
            i += 1 if "=" in opt else 2
            try:
                timeout = float(value)
                if not timeout > 0:
                    raise ValueError
            except ValueError:
                raise SystemExit(f"--timeout: expected a number of seconds > 0; got {value!r}\n"
                                 f"{_USAGE}") from None
            continue
        raise SystemExit(f"unrecognized option {opt!r}\n{_USAGE}")
    if i >= len(argv):
        raise SystemExit(_USAGE)
    first = argv[i]
    if first in ("-m", "-c"):
        if i + 1 >= len(argv):
            raise SystemExit(f"{first}: expected an argument\n{_USAGE}")
        return first, argv[i + 1], argv[i + 2:], timeout
    return "path", first, argv[i + 1:], timeout


def _run(kind, target, rest):
    try:
        _start(kind, target, rest)
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and (tb.tb_frame.f_code.co_filename == __file__
                                  or "runpy" in tb.tb_frame.f_code.co_filename):
            tb = tb.tb_next
        raise exc.with_traceback(tb)  # noqa: B904 - the same exception, its cause kept


def _start(kind, target, rest):
    if kind == "-m":
        sys.argv = [target, *rest]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif kind == "-c":
        sys.argv = ["-c", *rest]
        exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv = [target, *rest]
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")


def main(argv=None):
    """Run the program named on the command line under fail-fast."""
    kind, target, rest, timeout = _parse(sys.argv[1:] if argv is None else list(argv))
    if timeout is not None:
        os.environ["MPICOLL_TIMEOUT"] = repr(timeout)
        watchdog.ON = True
    run_main(_run, kind, target, rest)


if __name__ == "__main__":
    main()
