import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# tests/mpi runs under mpiexec (see test_mpi_suite.py); a plain pytest skips it.
collect_ignore = [] if "--with-mpi" in sys.argv else ["mpi"]
