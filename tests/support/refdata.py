"""Rank-deterministic test data and independent NumPy references.

Every rank can compute every other rank's data, so each rank computes the
expected result of a collective locally with NumPy, in rank order.
Values are small integers (or exact binary fractions), so floating-point
results are exact whatever the summation order and can be compared bitwise.
"""
import contextlib
import os

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

import mpicoll


def _affine(invec, inoutvec, datatype):
    # Elements are complex numbers a + bj standing for x -> a*x + b; the op
    # composes "first invec, then inoutvec": associative, not commutative.
    dt = dtlib.to_numpy_dtype(datatype)
    a = np.frombuffer(invec, dtype=dt)
    b = np.frombuffer(inoutvec, dtype=dt)
    b[...] = (a.real * b.real) + 1j * (b.real * a.imag + b.imag)


def _add(invec, inoutvec, datatype):
    dt = dtlib.to_numpy_dtype(datatype)
    b = np.frombuffer(inoutvec, dtype=dt)
    b += np.frombuffer(invec, dtype=dt)


AFFINE = MPI.Op.Create(_affine, commute=False)
USER_ADD = MPI.Op.Create(_add, commute=True)


def affine_ref(x, y):
    return (x.real * y.real) + 1j * (y.real * x.imag + y.imag)


UFUNC = {"SUM": np.add, "PROD": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
         "LAND": np.logical_and, "LOR": np.logical_or, "LXOR": np.logical_xor,
         "BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}
OPS = {name: getattr(MPI, name) for name in UFUNC}
OPS["AFFINE"] = AFFINE
OPS["USER_ADD"] = USER_ADD


def data(rank, n, dtype, opname="SUM", salt=0):
    """This rank's contribution: n elements of dtype, exact under opname."""
    dtype = np.dtype(dtype)
    i = np.arange(n, dtype=np.int64)
    k = rank * 7 + i * 3 + salt * 5
    if opname == "AFFINE":
        a = np.where(k % 3 == 0, -1.0, 1.0)
        return (a + 1j * (k % 5 - 2)).astype(dtype)
    if dtype.kind == "b":
        return ((k % 3) != 0) if opname != "LAND" else ((k % 4) != 0)
    if opname == "PROD":
        vals = 1 + (k % 2) if dtype.itemsize > 2 or dtype.kind in "fc" else (k % 5 != 0)
    elif opname in ("BAND", "BOR", "BXOR"):
        vals = (k * 37 + 11) % 128
    elif opname in ("LAND", "LOR", "LXOR"):
        vals = (k % 3)
    else:
        vals = (k % 9) - (4 if dtype.kind in "ifc" else 0)
        if dtype.kind == "u":
            vals = k % 9
    out = np.asarray(vals).astype(dtype)
    if dtype.kind == "c":
        out = out + 1j * ((k % 4) if opname != "PROD" else 0)
        out = out.astype(dtype)
    return out


def reduce_ref(blocks, opname, dtype):
    """Reduce the list of per-rank arrays in rank order."""
    acc = blocks[0].copy()
    for b in blocks[1:]:
        if opname == "AFFINE":
            acc = affine_ref(acc, b)
        elif opname == "USER_ADD":
            acc = acc + b
        else:
            acc = UFUNC[opname](acc, b).astype(dtype)
    return acc.astype(dtype)


def keeps_rank_order(fn, comm=MPI.COMM_WORLD):
    """Whether algorithm ``fn`` takes non-commutative ops on ``comm`` (node-aware
    algorithms do only where the nodes are blocks of consecutive ranks).
    """
    if fn.commutative_only:
        return False
    check = getattr(fn, "check_layout", None)
    if check is None:
        return True
    from mpicoll.core.topology import layout
    from mpicoll.engine.context import private_comm
    return check(layout(private_comm(comm)), False) is None


def usable(primitive, comm=MPI.COMM_WORLD, device=False, commutative=True):
    """The algorithms of ``primitive`` that can run a call on ``comm``'s nodes and memory
    (the library's own refusal: :func:`mpicoll.engine.call.refusal`). Unlike
    :func:`mpicoll.usable_algorithms`, a non-commutative op keeps the commutative-only
    algorithms: the tests check that they refuse it.
    """
    from mpicoll.engine.call import refusal
    from mpicoll.engine.context import private_comm
    pcomm = private_comm(comm)
    return [a for a in mpicoll.algorithms(primitive)
            if refusal(mpicoll.algorithm_info(primitive, a), pcomm, commutative, device) is None]


def runs_as_plan(primitive, algorithm, size=None):
    """True when ``algorithm`` records a plan (native and the shm algorithms run directly)."""
    from mpicoll.core.errors import NotSchedulable
    from mpicoll.sched.inspect import plan_of
    if algorithm == "native":
        return False
    try:
        plan_of(primitive, algorithm, size or MPI.COMM_WORLD.Get_size(), 0, 5)
    except NotSchedulable:
        return False
    return True


@contextlib.contextmanager
def on_nodes(spec, comm=MPI.COMM_WORLD):
    """A fresh ``comm.Dup()`` whose ranks are on the nodes ``MPICOLL_NODES=spec`` describes
    (read when its private communicator is made, here); freed on exit.
    """
    from mpicoll.engine.context import private_comm
    old = os.environ.get("MPICOLL_NODES")
    os.environ["MPICOLL_NODES"] = spec
    c = comm.Dup()
    try:
        private_comm(c)
    except Exception:
        c.Free()
        raise
    finally:
        if old is None:
            del os.environ["MPICOLL_NODES"]
        else:
            os.environ["MPICOLL_NODES"] = old
    try:
        yield c
    finally:
        c.Free()
