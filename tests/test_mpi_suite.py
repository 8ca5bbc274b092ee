"""Run the MPI test suite (tests/mpi) at every world size from one pytest command.

Each size is one ``mpiexec -n N python -m mpi4py -m pytest --with-mpi`` launch:
``python -m mpi4py`` turns a failing rank into MPI_Abort, ``MPIEXEC_TIMEOUT``
kills a deadlocked job, and pytest-timeout (thread method) dumps the stacks
of a hung test. The launch must exit 0 with every rank reporting a pass.
"""
import os
import re
import sys

import pytest

from launch import HERE_MPI, run_mpi

SIZES = [int(s) for s in os.environ.get("MPICOLL_TEST_SIZES", "1,2,3,4,5,8").split(",")]
# Generous bounds: 8 ranks share 2 cores. A hang ends the run, it never blocks it.
JOB_TIMEOUT = int(os.environ.get("MPICOLL_TEST_JOB_TIMEOUT", "900"))


@pytest.mark.parametrize("n", SIZES)
def test_mpi_suite(n):
    argv = [sys.executable, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-q",
            "-p", "no:cacheprovider", "--timeout=600", "--timeout-method=thread", HERE_MPI]
    proc = run_mpi(n, argv, timeout=JOB_TIMEOUT)
    out = proc.stdout + proc.stderr
    # Ranks share stdout, so summary lines can run together: count, don't anchor.
    summaries = re.findall(r"(\d+) passed(?:, \d+ \w+)* in ", out)
    assert proc.returncode == 0 and len(summaries) == n, (
        f"MPI suite at N={n} failed (exit {proc.returncode}):\n{out[-20000:]}")
    assert not re.search(r"\b\d+ (failed|errors?)\b", out), out[-20000:]
