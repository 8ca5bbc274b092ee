import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# tests/mpi runs under mpiexec (see test_mpi_suite.py); a plain pytest skips it.
collect_ignore = [] if "--with-mpi" in sys.argv else ["mpi"]


@pytest.fixture(scope="session")
def family_python():
    """family -> (python, None) or (None, reason): an interpreter whose mpi4py uses that MPI
    family (this one, or a venv with the family's wheel, built once: tests/mpifamily.py)."""
    import mpifamily
    found = {}

    def get(family):
        if family not in found:
            found[family] = mpifamily.python_for(family)
        return found[family]
    return get
