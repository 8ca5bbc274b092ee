"""tests/ mirrors the package: test modules here (serial, and those launching MPI jobs) and
in tests/mpi/ (run under mpiexec); their helpers and stand-ins (launch, mpifamily, refdata,
fakedevice, fake_cupy, plans_by_hand, ...) live in tests/support/, put on the path here so
that ``from launch import run_mpi`` works from any test module.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "support"))

# tests/mpi runs under mpiexec (see test_mpi_suite.py); a plain pytest skips it.
collect_ignore = [] if "--with-mpi" in sys.argv else ["mpi"]


@pytest.fixture(scope="session")
def family_python():
    """MPI family -> (python, None) or (None, reason): an interpreter whose mpi4py uses that MPI
    family (this one, or a venv with the family's wheel, built once:
    tests/support/mpifamily.py).
    """
    import mpifamily
    found = {}

    def get(family):
        if family not in found:
            found[family] = mpifamily.python_for(family)
        return found[family]
    return get
