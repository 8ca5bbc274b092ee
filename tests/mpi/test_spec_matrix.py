"""The generated matrix over every defined primitive, from its spec: exact data, exact results.

Every primitive in the registry (a plug-in's too: ``MPICOLL_TEST_PLUGINS`` names
modules or ``.py`` files to import first) x every algorithm that can run on
these ranks' nodes (``native`` included) x a few sizes (empty, one element, not divisible
by N, a few KiB)
x two dtypes x roots, on the data of the primitive's spec
(:mod:`mpicoll.calls.spec`: exact whatever the order of reduction) and checked
element by element against the spec's expected results, outputs first filled
with a sentinel so an element never written is caught. The bespoke matrices
(test_matrix.py, test_vmatrix.py) go further for the built-in primitives;
this one needs nothing but the primitive's module.
"""
import os

import numpy as np
import pytest
from mpi4py import MPI
from refdata import usable

import mpicoll
from mpicoll.bench.specs import SPECS, ArrayModule, Case
from mpicoll.core.plugins import import_modules

import_modules([p for p in os.environ.get("MPICOLL_TEST_PLUGINS", "").split(",") if p.strip()],
               flag="MPICOLL_TEST_PLUGINS")

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()
AM = ArrayModule("numpy")


def cases():
    for p in mpicoll.PRIMITIVES:
        if p in SPECS:
            for a in usable(p):
                yield pytest.param(p, a, id=f"{p}-{a}")


@pytest.mark.mpi
@pytest.mark.parametrize("primitive, algorithm", list(cases()))
def test_spec(primitive, algorithm):
    spec = SPECS[primitive]
    roots = (sorted({0, N - 1}) if spec.rooted else [0])
    ran = 0
    for dtype in ("float64", "int32"):
        itemsize = np.dtype(dtype).itemsize
        for nbytes in (0, itemsize, itemsize * (2 * N + 1) * (N if spec.blocked else 1), 4096):
            for root in roots:
                case = Case(spec, nbytes, dtype=dtype, op=MPI.SUM, opname="sum", root=root,
                            comm=comm, am=AM)
                case.prepare_check()
                case.call(algorithm)()
                wrong = comm.allreduce(case.wrong())
                assert wrong == 0, (f"{primitive}/{algorithm} N={N} {dtype} {case.bytes} B "
                                    f"root {root}: {wrong} elements wrong")
                ran += 1
    assert ran > 0
