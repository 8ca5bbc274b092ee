"""tests/mpi runs under mpiexec, every rank a pytest of its own.

A test that fails on some ranks only must end the job, never hang it: the
ranks that passed go on to the next test and wait there, in its collectives,
for a rank that is still in (or past) the failed one. So with more than one
rank, a rank stops at its first failure (like ``-x``; the summary is printed)
and then calls ``MPI_Abort``, which ends every rank, whatever the launcher
(MPICH's hydra, Open MPI's mpirun, srun) and whether or not pytest runs under
``python -m mpi4py``. A rank stuck inside an MPI call is ended by
pytest-timeout's thread method (``--timeout-method=thread``) and the launcher's
``MPIEXEC_TIMEOUT``.

The helpers the tests import (refdata, fakedevice) live in tests/support/, put on the
path here.
"""
import os
import sys
import time

import pytest
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "support"))      # refdata, fakedevice

# Small device calls run on host copies by default (mpicoll.engine.host_copy): the tests of the
# device transports (staged, aware, ipc) need their messages to go through them, so the
# suite turns that path off unless asked; test_device.py's ``fake-host-copy`` kind and
# test_host_copy.py turn it on.
os.environ.setdefault("MPICOLL_GPU_HOST_COPY", "0")

_WORLD = MPI.COMM_WORLD
_state = {"session": None, "status": 0}


def pytest_sessionstart(session):
    _state["session"] = session


def pytest_runtest_logreport(report):
    session = _state["session"]
    if report.failed and _WORLD.Get_size() > 1 and session is not None and not session.shouldfail:
        session.shouldfail = (f"rank {_WORLD.Get_rank()} stops at its first failure "
                              f"({report.nodeid}) and aborts the MPI job: the other ranks may "
                              "be waiting in this test's collectives")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    _state["status"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # After the terminal summary: a failed rank takes the whole job down with it.
    status = _state["status"]
    if status not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) \
            and _WORLD.Get_size() > 1 and MPI.Is_initialized() and not MPI.Is_finalized():
        sys.stdout.flush()
        sys.stderr.flush()
        # the launcher forwards the summary before the kill (else it may be lost)
        time.sleep(1.0)
        _WORLD.Abort(status)
