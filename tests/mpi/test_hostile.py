"""Hostile input on every API face: every rank gets a clear error (or MPI's defined
behaviour), nothing hangs, nothing crashes, the caller's buffers are untouched.

Each case in CASES builds its arguments, calls one API, and names the exception
and message it expects. The harness runs it on every rank, gathers every
rank's outcome, and checks that *every* rank raised (also when only one rank
had the bad argument: the agreement step makes the others raise too), that
the input arrays are bitwise unchanged, and that the communicator still works.
"""
import os
import re

import numpy as np
import pytest
from mpi4py import MPI
from refdata import AFFINE, usable

import mpicoll
import mpicoll.distributed as dist
from mpicoll import ArgumentError, ArgumentTypeError

world = MPI.COMM_WORLD
N, RANK = world.Get_size(), world.Get_rank()
LAST = N - 1

pytestmark = pytest.mark.timeout(300)


class Case:
    def __init__(self, name, build, exc, match, eclass=None, min_size=1, bad="all"):
        self.name, self.build, self.exc, self.match = name, build, exc, match
        self.eclass, self.min_size, self.bad = eclass, min_size, bad


CASES = []


def case(name, exc=ArgumentError, match="", eclass=None, min_size=1, bad="all"):
    """Register ``build() -> (call, inputs)``; ``bad``: which ranks pass the bad argument."""
    def deco(build):
        CASES.append(Case(name, build, exc, match, eclass, min_size, bad))
        return build
    return deco


def arange(n=6, dtype=np.float64):
    return (np.arange(n) + RANK).astype(dtype)


def readonly(a):
    a.flags.writeable = False
    return a


# -- functional API: types, dtypes, layouts -----------------------------------

@case("f_sendbuf_list", ArgumentTypeError, "sendbuf: expected a NumPy or CuPy array; got list",
      MPI.ERR_TYPE)
def _():
    return lambda: mpicoll.allreduce([1.0, 2.0]), []


@case("f_sendbuf_none", ArgumentTypeError, "sendbuf: expected a NumPy or CuPy array; got NoneType")
def _():
    return lambda: mpicoll.allreduce(None), []


@case("f_sendbuf_scalar", ArgumentTypeError, "expected a NumPy or CuPy array; got float")
def _():
    return lambda: mpicoll.bcast(3.0), []


@case("f_non_contiguous", ArgumentError, "C-contiguous", MPI.ERR_BUFFER)
def _():
    x = arange(12)
    return lambda: mpicoll.allreduce(x[::2]), [x]


@case("f_transposed_2d", ArgumentError, "C-contiguous", MPI.ERR_BUFFER)
def _():
    x = arange(12).reshape(3, 4)
    return lambda: mpicoll.allgather(x.T), [x]


@case("f_byteswapped_dtype", ArgumentError, "byte-swapped dtype >f8", MPI.ERR_TYPE)
def _():
    x = arange().astype(">f8")
    return lambda: mpicoll.allreduce(x), [x]


@case("f_byteswapped_on_one_rank", ArgumentError, "byte-swapped", MPI.ERR_TYPE, bad="last")
def _():
    x = arange(4, np.int32)
    if RANK == LAST:
        x = x.astype(">i4")
    return lambda: mpicoll.allgather(x), [x]


@case("f_object_dtype", ArgumentError, "numeric or bool dtype", MPI.ERR_TYPE)
def _():
    x = np.array([1, "a", None], dtype=object)
    return lambda: mpicoll.bcast(x), []


@case("f_structured_dtype", ArgumentError, "numeric or bool dtype", MPI.ERR_TYPE)
def _():
    x = np.zeros(3, dtype=[("a", "f8"), ("b", "i4")])
    return lambda: mpicoll.allgather(x), [x]


@case("f_datetime_dtype", ArgumentError, "numeric or bool dtype", MPI.ERR_TYPE)
def _():
    x = np.array(["2024-01-01"] * 3, dtype="datetime64[D]")
    return lambda: mpicoll.gather(x), [x]


@case("f_unicode_dtype", ArgumentError, "numeric or bool dtype", MPI.ERR_TYPE)
def _():
    x = np.array(["ab", "cd"])
    return lambda: mpicoll.alltoall(x), [x]


# -- ops ------------------------------------------------------------------------

@case("f_band_on_float", ArgumentError,
      "BAND is defined for signed integer, unsigned integer data",
      MPI.ERR_OP)
def _():
    x = arange()
    return lambda: mpicoll.allreduce(x, op=MPI.BAND), [x]


@case("f_sum_on_bool", ArgumentError, "SUM is defined for", MPI.ERR_OP)
def _():
    x = np.array([True, False, True])
    return lambda: mpicoll.reduce(x, op=MPI.SUM), [x]


@case("f_max_on_complex", ArgumentError, "MAX", MPI.ERR_OP)
def _():
    x = arange().astype(complex)
    return lambda: mpicoll.reduce_scatter_block(np.tile(x, N), op=MPI.MAX), [x]


@case("f_op_string", ArgumentTypeError, "op: expected an mpi4py.MPI.Op", MPI.ERR_OP)
def _():
    x = arange()
    return lambda: mpicoll.allreduce(x, op="sum"), [x]


@case("f_op_maxloc", ArgumentError, "MAXLOC", MPI.ERR_OP)
def _():
    x = arange()
    return lambda: mpicoll.allreduce(x, op=MPI.MAXLOC), [x]


@case("f_op_null", ArgumentError, "OP_NULL", MPI.ERR_OP)
def _():
    x = arange()
    return lambda: mpicoll.allreduce(x, op=MPI.OP_NULL), [x]


@case("f_op_on_one_rank", ArgumentError, "BXOR", MPI.ERR_OP, bad="last")
def _():
    x = arange()
    return lambda: mpicoll.allreduce(x, op=MPI.BXOR if RANK == LAST else MPI.SUM), [x]


@case("f_noncommutative_with_ring", ArgumentError, "needs a commutative op", MPI.ERR_OP)
def _():
    x = np.ones(4, complex)
    return lambda: mpicoll.allreduce(x, op=AFFINE, algorithm="ring"), [x]


# -- receive buffers and aliasing ---------------------------------------------------

@case("f_recvbuf_wrong_size_one_rank", ArgumentError, "recvbuf: expected 6 elements",
      MPI.ERR_COUNT,
      bad="last")
def _():
    x = arange()
    r = np.full(6 + (RANK == LAST), -7.0)
    return lambda: mpicoll.allreduce(x, r), [x, r]


@case("f_recvbuf_wrong_dtype", ArgumentError, "recvbuf: expected dtype float64", MPI.ERR_TYPE)
def _():
    x = arange()
    r = np.full(6, -7, np.float32)
    return lambda: mpicoll.allreduce(x, r), [x, r]


@case("f_recvbuf_readonly", ArgumentError, "expected a writable array", MPI.ERR_BUFFER)
def _():
    x = arange()
    r = readonly(np.full(6, -7.0))
    return lambda: mpicoll.allreduce(x, r), [x, r]


@case("f_alias_same_array", ArgumentError, "recvbuf: overlaps sendbuf", MPI.ERR_BUFFER)
def _():
    x = arange()
    return lambda: mpicoll.allreduce(x, x), [x]


@case("f_alias_partial_overlap", ArgumentError, "overlaps sendbuf", MPI.ERR_BUFFER)
def _():
    buf = arange(12)
    return lambda: mpicoll.allreduce(buf[0:6], buf[3:9]), [buf]


@case("f_alias_alltoall", ArgumentError, "overlaps sendbuf", MPI.ERR_BUFFER)
def _():
    x = arange(2 * N)
    return lambda: mpicoll.alltoall(x, x), [x]


@case("f_alias_gather_on_root_only", ArgumentError, "overlaps sendbuf", MPI.ERR_BUFFER, bad="last")
def _():
    big = np.zeros(3 * N)
    x = big[:3] if RANK == LAST else arange(3)
    return lambda: mpicoll.gather(x, big if RANK == LAST else None, root=LAST), [big, x]


@case("f_alias_reduce_scatter", ArgumentError, "overlaps sendbuf", MPI.ERR_BUFFER)
def _():
    x = arange(2 * N)
    return lambda: mpicoll.reduce_scatter_block(x, x[:2]), [x]


@case("f_alias_scatter_root", ArgumentError, "overlaps sendbuf", MPI.ERR_BUFFER, bad="last")
def _():
    x = arange(2 * N)
    send = x if RANK == LAST else None
    return lambda: mpicoll.scatter(send, x[:2] if RANK == LAST else np.empty(2), LAST), [x]


# -- roots ------------------------------------------------------------------------

@case("f_root_too_large", ArgumentError, rf"root: expected a rank in \[0, {N - 1}\]", MPI.ERR_ROOT)
def _():
    x = arange()
    return lambda: mpicoll.bcast(x, root=N), [x]


@case("f_root_negative", ArgumentError, "root: expected a rank", MPI.ERR_ROOT)
def _():
    x = arange()
    return lambda: mpicoll.reduce(x, root=-1), [x]


@case("f_root_float", ArgumentTypeError, "root: expected an integer rank", MPI.ERR_ROOT)
def _():
    x = arange()
    return lambda: mpicoll.gather(x, root=0.0), [x]


@case("f_root_bool", ArgumentTypeError, "root: expected an integer rank", MPI.ERR_ROOT)
def _():
    x = arange()
    return lambda: mpicoll.bcast(x, root=True), [x]


@case("f_root_none", ArgumentTypeError, "root: expected an integer rank", MPI.ERR_ROOT)
def _():
    x = arange(N)
    return lambda: mpicoll.scatter(x, np.empty(1), root=None), [x]


@case("f_root_bad_on_one_rank", ArgumentError, "root", MPI.ERR_ROOT, bad="last")
def _():
    x = arange()
    return lambda: mpicoll.bcast(x, root=N + 3 if RANK == LAST else 0), [x]


@case("f_bcast_readonly_nonroot", ArgumentError, "buf: expected a writable array", MPI.ERR_BUFFER,
      min_size=2, bad="last")
def _():
    x = arange()
    if RANK == LAST:
        x = readonly(x)
    return lambda: mpicoll.bcast(x, root=0), [x]


@case("f_reduce_in_place_off_root", ArgumentError, "IN_PLACE is only valid on the root",
      MPI.ERR_BUFFER, min_size=2, bad="last")
def _():
    x = arange()
    send = MPI.IN_PLACE if RANK in (0, LAST) else x
    return lambda: mpicoll.reduce(send, x if RANK in (0, LAST) else None, MPI.SUM, 0), [x]


# -- counts ---------------------------------------------------------------------

@case("f_gather_recvbuf_small_on_root", ArgumentError, "recvbuf: expected", MPI.ERR_COUNT,
      bad="last")
def _():
    x = arange(3)
    r = np.full(3 * N - 1, -1.0) if RANK == LAST else None
    return lambda: mpicoll.gather(x, r, root=LAST), [x] + ([r] if r is not None else [])


@case("f_scatter_recvbuf_none", ArgumentError, "recvbuf: expected an array to receive",
      MPI.ERR_BUFFER)
def _():
    x = arange(N)
    return lambda: mpicoll.scatter(x, None, 0), [x]


@case("f_scatter_sendbuf_wrong_size", ArgumentError, "sendbuf: expected", MPI.ERR_COUNT,
      bad="last")
def _():
    x = arange(2 * N + 1)
    return lambda: mpicoll.scatter(x, np.empty(2), root=LAST), [x]


@case("f_recvcounts_wrong_length", ArgumentError, f"recvcounts: expected {N} counts",
      MPI.ERR_COUNT)
def _():
    x = arange(N + 1)
    return lambda: mpicoll.reduce_scatter(x, None, [1] * (N + 1)), [x]


@case("f_recvcounts_negative", ArgumentError, r"recvcounts\[0\]: expected a non-negative integer",
      MPI.ERR_COUNT)
def _():
    x = arange(N)
    return lambda: mpicoll.reduce_scatter(x, None, [-1] + [1] * (N - 1)), [x]


@case("f_recvcounts_float", ArgumentError, "recvcounts", MPI.ERR_COUNT)
def _():
    x = arange(N)
    return lambda: mpicoll.reduce_scatter(x, None, [1.0] * N), [x]


@case("f_recvcounts_not_a_sequence", ArgumentTypeError, "recvcounts: expected a sequence",
      MPI.ERR_COUNT)
def _():
    x = arange(N)
    return lambda: mpicoll.reduce_scatter(x, None, 7), [x]


@case("f_recvcounts_sum_mismatch", ArgumentError, r"sum\(recvcounts\)", MPI.ERR_COUNT)
def _():
    x = arange(N + 1)
    return lambda: mpicoll.reduce_scatter(x, None, [1] * N), [x]


@case("f_recvcounts_huge", ArgumentError, f"expected {(2**62) * N} elements", MPI.ERR_COUNT)
def _():
    x = arange(N)
    return lambda: mpicoll.reduce_scatter(x, None, [2**62] * N), [x]


@case("f_reduce_scatter_block_indivisible", ArgumentError, f"multiple of {N}", MPI.ERR_COUNT,
      min_size=2)
def _():
    x = arange(N + 1)
    return lambda: mpicoll.reduce_scatter_block(x), [x]


@case("f_alltoall_indivisible", ArgumentError, f"multiple of {N}", MPI.ERR_COUNT, min_size=2)
def _():
    x = arange(N + 1)
    return lambda: mpicoll.alltoall(x), [x]


# -- algorithm, communicator ------------------------------------------------------

@case("f_unknown_algorithm", ArgumentError, "bcast has no algorithm 'warp'; valid:")
def _():
    x = arange()
    return lambda: mpicoll.bcast(x, algorithm="warp"), [x]


@case("f_algorithm_not_a_string", ArgumentTypeError, "algorithm: expected a name")
def _():
    x = arange()
    return lambda: mpicoll.allreduce(x, algorithm=3), [x]


@case("f_algorithm_on_one_rank", ArgumentError, "no algorithm 'warp'", bad="last")
def _():
    x = arange()
    return lambda: mpicoll.allgather(x, algorithm="warp" if RANK == LAST else None), [x]


@case("f_comm_string", ArgumentTypeError, "comm: expected an mpi4py.MPI.Intracomm", MPI.ERR_COMM)
def _():
    x = arange()
    return lambda: mpicoll.allreduce(x, comm="world"), [x]


@case("f_comm_null", ArgumentError, "COMM_NULL", MPI.ERR_COMM)
def _():
    x = arange()
    return lambda: mpicoll.allreduce(x, comm=MPI.COMM_NULL), [x]


# -- P2PComm (mpi4py buffer specifications) ---------------------------------------

def _pc():
    return mpicoll.P2PComm(world)


@case("p_unknown_typecode", ArgumentTypeError, "unknown datatype code")
def _():
    x = arange()
    return lambda: _pc().Bcast([x, "Zz"]), [x]


@case("p_count_exceeds_buffer", ArgumentError, "count 7", MPI.ERR_TRUNCATE)
def _():
    x = arange()
    return lambda: _pc().Bcast([x, 7, MPI.DOUBLE]), [x]


@case("p_count_above_2_31", ArgumentError, f"count {2**31 + 5}", MPI.ERR_TRUNCATE)
def _():
    x = arange()
    return lambda: _pc().Allreduce([x, 2**31 + 5, MPI.DOUBLE], np.empty(6)), [x]


@case("p_negative_count", ArgumentError, "non-negative count", MPI.ERR_COUNT)
def _():
    x = arange()
    return lambda: _pc().Bcast([x, -1]), [x]


@case("p_bool_count", ArgumentTypeError, "count")
def _():
    x = arange()
    return lambda: _pc().Bcast([x, True]), [x]


@case("p_displacement_beyond", ArgumentError, "exceeds the buffer", MPI.ERR_TRUNCATE)
def _():
    x = arange()
    return lambda: _pc().Bcast([x, (3, 5), MPI.DOUBLE]), [x]


@case("p_partial_elements", ArgumentError, "not a whole number", MPI.ERR_BUFFER)
def _():
    x = np.zeros(7, np.int8)
    return lambda: _pc().Bcast([x, MPI.DOUBLE]), [x]


# Open MPI 5.0 crashes in MPI_Pack_size on an uncommitted datatype, so mpicoll cannot ask it
# (mpicoll/_datatypes.py: _ASKS_COMMIT); the case runs on MPICH only.
@case("p_uncommitted_datatype", ArgumentError, "buf: expected a committed datatype", MPI.ERR_TYPE)
def _():
    if "Open MPI" in MPI.Get_library_version():
        pytest.skip("Open MPI crashes in MPI_Pack_size on an uncommitted datatype")
    x = arange(4)
    dt = MPI.DOUBLE.Create_vector(2, 1, 2)      # derived types are fine once committed

    def call():
        try:
            _pc().Bcast([x, 2, dt])
        finally:
            dt.Free()
    return call, [x]


@case("p_allreduce_recv_in_place", ArgumentError, "recvbuf", MPI.ERR_BUFFER)
def _():
    x = arange()
    return lambda: _pc().Allreduce(x, MPI.IN_PLACE), [x]


@case("p_string_buffer", ArgumentTypeError, "expected a buffer")
def _():
    return lambda: _pc().Bcast("not a buffer"), []


@case("p_bytes_as_receive", ArgumentError, "writable", MPI.ERR_BUFFER, min_size=2, bad="last")
def _():
    buf = b"\0" * 8 if RANK == LAST else bytearray(8)
    return lambda: _pc().Bcast(buf, 0), []


@case("p_spec_of_four_items", ArgumentTypeError, "list of 4 items", bad="last")
def _():
    x = arange()
    return lambda: _pc().Gather(x, [x, 1, 2, 3] if RANK == LAST else None, LAST), [x]


@case("p_alias", ArgumentError, "overlaps", MPI.ERR_BUFFER)
def _():
    x = arange()
    return lambda: _pc().Allreduce(x, x), [x]


@case("p_op_replace", ArgumentError, "MAXLOC, MINLOC, REPLACE", MPI.ERR_OP)
def _():
    x = arange()
    return lambda: _pc().Reduce(x, np.empty(6), MPI.REPLACE, 0), [x]


@case("p_rs_counts_from_bad_recvbuf", ArgumentError, "recvbuf", bad="last")
def _():
    x = arange(N)
    r = np.empty(1)
    return lambda: _pc().Reduce_scatter(x, "junk" if RANK == LAST else r), [x]


@case("p_unknown_algorithm_choice", ArgumentError, "allreduce has no algorithm 'nope'")
def _():
    return lambda: mpicoll.P2PComm(world, allreduce="nope"), []


@case("p_unknown_primitive_choice", ArgumentError, "not a primitive")
def _():
    return lambda: mpicoll.P2PComm(world, frobnicate="ring"), []


@case("p_not_a_comm", ArgumentTypeError, "comm: expected an mpi4py.MPI.Intracomm")
def _():
    return lambda: mpicoll.P2PComm("world"), []


# -- mpicoll.distributed -----------------------------------------------------------

@pytest.fixture
def group():
    dist.init_process_group("p2p")
    yield
    dist.destroy_process_group()


@case("d_bad_backend", ArgumentError, "backend: expected one of")
def _():
    return lambda: dist.init_process_group(backend="tcp"), []


@case("d_bad_algorithm", ArgumentError, "no algorithm 'nope'")
def _():
    return lambda: dist.init_process_group(algorithms={"all_reduce": "nope"}), []


@case("d_op_string", ArgumentTypeError, "op: expected a mpicoll.distributed.ReduceOp")
def _():
    t = arange()
    return lambda: dist.all_reduce(t, op="sum"), [t]


@case("d_op_string_one_rank", ArgumentTypeError, "op: expected", bad="last")
def _():
    t = arange()
    return lambda: dist.all_reduce(t, op="sum" if RANK == LAST else dist.ReduceOp.SUM), [t]


@case("d_avg_on_integers", ArgumentError, "AVG needs floating-point data", MPI.ERR_OP)
def _():
    t = arange(6, np.int64)
    return lambda: dist.all_reduce(t, op=dist.ReduceOp.AVG), [t]


@case("d_reduce_avg_integers_dst", ArgumentError, "AVG needs floating-point", MPI.ERR_OP)
def _():
    t = arange(6, np.int32)
    return lambda: dist.reduce(t, dst=0, op=dist.ReduceOp.AVG), [t]


@case("d_all_gather_wrong_length", ArgumentError, f"expected {N} arrays", MPI.ERR_COUNT)
def _():
    t = arange(3)
    lst = [np.full(3, -1.0) for _ in range(N + 1)]
    return lambda: dist.all_gather(lst, t), [t] + lst


@case("d_all_gather_wrong_shape", ArgumentError, r"tensor_list\[0\]: expected shape \(3,\)",
      MPI.ERR_COUNT, bad="last")
def _():
    t = arange(3)
    lst = [np.full(3 + (RANK == LAST and i == 0), -1.0) for i in range(N)]
    return lambda: dist.all_gather(lst, t), [t] + lst


@case("d_gather_list_none_on_dst", ArgumentTypeError, "gather_list: expected a list", bad="last")
def _():
    t = arange(3)
    return lambda: dist.gather(t, None, dst=LAST), [t]


@case("d_scatter_list_wrong_dtype", ArgumentError, "scatter_list", MPI.ERR_COUNT, bad="last")
def _():
    t = np.zeros(3)
    lst = [np.ones(3, np.float32) for _ in range(N)]
    return lambda: dist.scatter(t, lst if RANK == LAST else None, src=LAST), [t] + lst


@case("d_broadcast_src_out_of_range", ArgumentError, "root: expected a rank", MPI.ERR_ROOT)
def _():
    t = arange(3)
    return lambda: dist.broadcast(t, src=N), [t]


@case("d_reduce_scatter_not_a_list", ArgumentTypeError, "input_list: expected a list")
def _():
    t = np.zeros(3)
    return lambda: dist.reduce_scatter(t, np.ones((N, 3))), [t]


@case("d_all_to_all_alias", ArgumentError, "overlaps", MPI.ERR_BUFFER)
def _():
    t = arange(2 * N)
    return lambda: dist.all_to_all_single(t, t), [t]


# -- environment variables with junk values -----------------------------------------

class env:
    """Set an environment variable on some ranks for the duration of the call."""

    def __init__(self, name, value, where=True):
        self.name, self.value, self.where = name, value, where

    def __call__(self, fn):
        def call():
            old = os.environ.get(self.name)
            if self.where:
                os.environ[self.name] = self.value
            try:
                return fn()
            finally:
                if old is None:
                    os.environ.pop(self.name, None)
                else:
                    os.environ[self.name] = old
        return call


@case("e_check_junk", ArgumentError, "MPICOLL_CHECK: expected one of")
def _():
    x = arange()
    return env("MPICOLL_CHECK", "paranoid")(lambda: mpicoll.allreduce(x)), [x]


@case("e_check_junk_one_rank", ArgumentError, "MPICOLL_CHECK", bad="last")
def _():
    x = arange()
    return env("MPICOLL_CHECK", "yes please", RANK == LAST)(lambda: mpicoll.bcast(x)), [x]


@case("e_algorithm_junk", ArgumentError, "MPICOLL_ALLREDUCE_ALGORITHM: allreduce has no algorithm")
def _():
    x = arange()
    return env("MPICOLL_ALLREDUCE_ALGORITHM", "quantum")(lambda: mpicoll.allreduce(x)), [x]


@case("e_algorithm_junk_one_rank", ArgumentError, "MPICOLL_GATHER_ALGORITHM", bad="last")
def _():
    x = arange()
    return env("MPICOLL_GATHER_ALGORITHM", "; rm -rf /", RANK == LAST)(
        lambda: mpicoll.gather(x)), [x]


@case("e_algorithm_junk_distributed", ArgumentError, "MPICOLL_BCAST_ALGORITHM")
def _():
    t = arange()
    return env("MPICOLL_BCAST_ALGORITHM", "999")(lambda: dist.broadcast(t, 0)), [t]


# -- the harness ----------------------------------------------------------------------

def _run(c):
    built = c.build()
    call, inputs = built
    keep = [np.array(a, copy=True) for a in inputs]
    try:
        call()
        mine = None
    except BaseException as exc:  # anything must be reported, not crash the rank
        mine = exc
    info = None if mine is None else (
        type(mine).__name__, str(mine), isinstance(mine, c.exc),
        mine.Get_error_class() if isinstance(mine, MPI.Exception) else None)
    changed = [i for i, (a, b) in enumerate(zip(inputs, keep, strict=True))
               if not np.array_equal(np.asarray(a).view(np.uint8), b.view(np.uint8))]
    return info, changed


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_hostile(name, request):
    c = next(c for c in CASES if c.name == name)
    if N < c.min_size:
        pytest.skip(f"needs {c.min_size} ranks")
    if (name.startswith("d_") and "d_bad" not in name) or name.endswith("_distributed"):
        request.getfixturevalue("group")
    info, changed = _run(c)
    every = world.allgather((info, changed))
    for r, (inf, ch) in enumerate(every):
        assert inf is not None, f"rank {r} did not raise for {name}: {every}"
        assert inf[2] or inf[0] == "ArgumentError", f"rank {r}: {inf[0]}: {inf[1]}"
        assert not ch, f"rank {r}: input arrays {ch} were modified"
    bad_ranks = range(N) if c.bad == "all" else [LAST]
    for r in bad_ranks:
        inf = every[r][0]
        assert inf[2], f"rank {r}: expected {c.exc.__name__}, got {inf[0]}: {inf[1]}"
        assert re.search(c.match, inf[1]), f"rank {r}: {c.match!r} not in {inf[1]!r}"
        if c.eclass is not None:
            assert inf[3] == c.eclass, f"rank {r}: error class {inf[3]} != {c.eclass}"
    if c.bad != "all":
        for r in set(range(N)) - set(bad_ranks):
            inf = every[r][0]
            # The others learn who failed and why.
            assert f"rank(s) {LAST}" in inf[1] and re.search(c.match, inf[1]), inf
    # The library is still usable: nothing stale on the private communicator.
    assert np.array_equal(mpicoll.allreduce(np.ones(2)), np.full(2, float(N)))


def test_at_least_40_cases():
    assert len(CASES) >= 40
    faces = {c.name[0] for c in CASES}
    assert faces >= {"f", "p", "d", "e"}


# -- defined behaviour, not errors ------------------------------------------------------

@pytest.mark.parametrize("shape", [(0,), (0, 3), (N, 0)])
def test_zero_size_every_primitive(shape):
    """Zero elements: every primitive returns correctly shaped empty results."""
    x = np.zeros(shape)
    assert mpicoll.bcast(x.copy()).shape == shape
    assert mpicoll.allreduce(x).shape == shape
    r = mpicoll.reduce(x, root=LAST)
    assert (r.shape == shape) if RANK == LAST else r is None
    assert mpicoll.allgather(x).shape == (N,) + shape
    g = mpicoll.gather(x, root=0)
    assert (g.shape == (N,) + shape) if RANK == 0 else g is None
    assert mpicoll.scatter(np.zeros(0) if RANK == 0 else None, np.zeros(0)).size == 0
    assert mpicoll.reduce_scatter(np.zeros(0), None, [0] * N).size == 0
    assert mpicoll.alltoall(np.zeros(0)).size == 0
    for algo in usable("allreduce"):
        assert mpicoll.allreduce(np.zeros(0, np.int32), algorithm=algo).size == 0


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("opname", ["SUM", "MIN", "MAX", "PROD"])
def test_nan_and_inf(opname):
    """NaN/inf data: mpicoll's MIN/MAX propagate NaN (NumPy semantics: np.minimum /
    np.maximum); results equal NumPy's rank-order reduction and are bitwise identical
    on every rank, for every algorithm. (The MPI library's own MIN/MAX need not
    propagate NaN, so native results may differ where NaN is involved.)
    """
    op, ufunc = getattr(MPI, opname), {"SUM": np.add, "MIN": np.minimum, "MAX": np.maximum,
                                       "PROD": np.multiply}[opname]
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]

    def data(r):
        v = np.array([special[(r + k) % len(special)] for k in range(12)] + [1.0, 2.0],
                     dtype=np.float64)
        if r == N - 1:
            v[-1] = np.nan                   # one NaN somewhere in every column set
        return v
    ref = data(0)
    for r in range(1, N):
        ref = ufunc(ref, data(r))
    for algo in usable("allreduce"):
        x = data(RANK)
        got = mpicoll.allreduce(x, op=op, algorithm=algo)
        assert np.array_equal(x, data(RANK), equal_nan=True)
        every = world.allgather(got.view(np.uint64).tolist())
        assert all(e == every[0] for e in every), f"{algo}: ranks disagree bitwise"
        if algo != "native" or opname in ("SUM", "PROD"):
            assert np.array_equal(np.isnan(got), np.isnan(ref)), (algo, got, ref)
            assert np.array_equal(got[~np.isnan(got)], ref[~np.isnan(ref)]), (algo, got, ref)
    if opname in ("MIN", "MAX"):
        assert np.isnan(mpicoll.allreduce(data(RANK), op=op, algorithm="recursive_doubling")[-1])


@pytest.mark.parametrize("dtype",
                         ["float16", "longdouble", "clongdouble", "int8", "uint64", "bool"])
def test_unusual_dtypes_match_native(dtype):
    """Dtypes MPI can send are either reduced correctly (checked against native) or refused."""
    x = (np.arange(5) % 3 + RANK % 2).astype(dtype)
    op = MPI.LOR if dtype == "bool" else MPI.SUM
    got = mpicoll.allreduce(x, op=op, algorithm="ring")
    want = np.empty_like(x)
    world.Allreduce(x, want, op)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("root_type", [np.int64, np.int32, np.uint8])
def test_p2pcomm_numpy_integer_root(root_type):
    """A NumPy integer root works like an int (it used to be treated as 'not me')."""
    root = root_type(LAST)
    pc = mpicoll.P2PComm(world)
    x = np.full(3, RANK + 1.0)
    r = np.full(3, -1.0)
    pc.Reduce(x, r, MPI.SUM, root)
    if RANK == LAST:
        assert np.array_equal(r, np.full(3, N * (N + 1) / 2))
    g = np.full((N, 3), -1.0)
    pc.Gather(x, g, root)
    if RANK == LAST:
        assert np.array_equal(g[:, 0], np.arange(1.0, N + 1))
    out = np.empty(3)
    pc.Scatter(np.arange(3.0 * N) if RANK == LAST else None, out, root)
    assert np.array_equal(out, np.arange(3.0 * RANK, 3.0 * RANK + 3))


# -- large counts -------------------------------------------------------------------------

def _mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@pytest.mark.mpi(min_size=2)
@pytest.mark.timeout(600)
def test_large_count_bcast_above_2_31():
    """A 2^31 + 8 element (= byte) uint8 bcast, hand-written algorithm: mpi4py 4 uses
    MPICH's large-count (``MPI_Send_c``) calls, so nothing overflows. Only at N = 2, when
    the machine has the memory (the root's zero buffer is never touched, so it costs no
    memory; the receiver's 2 GiB does); MPICOLL_TEST_LARGE=0 skips it.
    """
    if N != 2 or os.environ.get("MPICOLL_TEST_LARGE", "1") == "0":
        pytest.skip("runs at N = 2 only (MPICOLL_TEST_LARGE=0 skips it)")
    if MPI.Get_version() < (4, 0):
        # Open MPI 5.0 is MPI 3.1: a plain comm.Send of 2^31 + 8 bytes fails (MPI_ERR_ARG).
        pytest.skip(f"needs MPI 4 large-count calls; {MPI.Get_library_version().split(',')[0]} "
                    f"is MPI {'.'.join(map(str, MPI.Get_version()))}")
    ok = world.allreduce(int(_mem_available() > 8 * 2**30), op=MPI.MIN)
    if not ok:
        pytest.skip("needs 8 GiB of available memory")
    n = 2**31 + 8
    if RANK == 0:
        buf = np.zeros(n, np.uint8)               # calloc'd: untouched pages cost nothing
        buf[2**31 - 1] = 5                        # the last byte a 32-bit count reaches
        buf[-3:] = 7                              # beyond it
    else:
        buf = np.ones(n, np.uint8)
    mpicoll.bcast(buf, 0, algorithm="binomial")
    if RANK == 1:
        assert buf[2**31 - 1] == 5 and (buf[-3:] == 7).all()
        assert np.count_nonzero(buf) == 4         # every other byte was overwritten with 0
    del buf
    world.Barrier()


def _combine_raises_under_seterr():
    from mpicoll.device.reduce import combine
    a, b = np.array([np.inf]), np.array([-np.inf])
    with np.errstate(all="raise"):
        try:
            combine(MPI.SUM, a, b, b)
        except FloatingPointError:
            return True
    return False


@pytest.mark.parametrize("algo", ["reduce_bcast", "ring", "recursive_doubling"])
def test_floating_point_traps_do_not_hang(algo):
    """Inf + -inf under ``np.seterr(all="raise")`` (or ``-W error``): MPI defines no FP
    exceptions, so the reduction must complete (NaN) on every rank, never raise mid-
    algorithm on one rank (which leaves the others waiting forever). Needs the reductions
    to run under ``np.errstate(all="ignore")`` (mpicoll/device/reduce.py: reported); skipped
    until then
    because the failure mode is a hang.
    """
    if _combine_raises_under_seterr():
        pytest.skip("mpicoll.device.reduce.combine raises FloatingPointError under "
                    "np.seterr(all='raise'): "
                    "a mid-algorithm error on one rank would hang the others (known issue)")
    x = np.array([np.inf if RANK == 0 else -np.inf, 1.0])
    with np.errstate(all="raise"):
        got = mpicoll.allreduce(x, algorithm=algo)
    assert (np.isnan(got[0]) or N == 1) and got[1] == N
