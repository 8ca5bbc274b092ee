"""Not part of the suite (no ``test_`` prefix): run by tests/test_mpi_suite.py to show
that a test failing on one rank only ends the whole MPI job instead of hanging it.

The last rank fails the first test before its barrier; the other ranks pass it (their
barrier is matched by the last rank's barrier in the second test) and then wait in the
second test's barrier, while the last rank waits for a message that comes after it:
a deadlock, unless the failed rank stops and takes the job down (tests/mpi/conftest.py).
So it stays here, beside that conftest, not in tests/support: elsewhere the conftest does not
apply and the job hangs.
"""
import pytest
from mpi4py import MPI

comm = MPI.COMM_WORLD
LAST = comm.Get_size() - 1


@pytest.mark.mpi(min_size=2)
def test_fails_on_last_rank():
    assert comm.Get_rank() != LAST, "deliberate failure on the last rank only"
    comm.Barrier()


@pytest.mark.mpi(min_size=2)
def test_then_barrier_and_message():
    comm.Barrier()
    if comm.Get_rank() == 0:
        comm.send("after the barrier", dest=LAST, tag=7)
    elif comm.Get_rank() == LAST:
        assert comm.recv(source=0, tag=7) == "after the barrier"
