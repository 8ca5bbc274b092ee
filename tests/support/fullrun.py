"""Whether this is the full run (``python -m pytest --full``, CI) or the quick check.

``--full`` (tests/conftest.py) sets ``MPICOLL_TEST_FULL=1`` before the test modules are
collected, and the MPI launches inherit it, so a module that chooses its cases at import
(tests/test_mpi_suite.py) and a test inside tests/mpi ask the same question here.
"""
import os
import sys

import mpifamily

__all__ = ["full", "families"]


def full():
    """True in the full run (``--full`` or ``MPICOLL_TEST_FULL=1``), False in the quick one."""
    return os.environ.get("MPICOLL_TEST_FULL", "").strip() not in ("", "0")


def families():
    """The MPI families the tests launch: ``MPICOLL_TEST_MPI`` where set, else every family in
    the full run and this interpreter's own in the quick one (no second venv is built).
    """
    if full() or "MPICOLL_TEST_MPI" in os.environ:
        return mpifamily.selected()
    own = mpifamily.family_of(sys.executable)
    return [own if own in mpifamily.FAMILIES else "mpich"]
