"""Selection, registry and bad-input behaviour of the functional API, on every rank."""

import numpy as np
import pytest
from mpi4py import MPI
from refdata import AFFINE

import mpicoll

WORLD = MPI.COMM_WORLD
N, RANK = WORLD.Get_size(), WORLD.Get_rank()

#: The textbook algorithms every build registers. Not the whole registry: a new algorithm
#: is one decorated function, and nothing here has to change for it.
TABLE = {
    "bcast": {"linear", "binomial", "scatter_allgather", "pipeline"},
    "reduce": {"linear", "binomial", "rabenseifner"},
    "allreduce": {"reduce_bcast", "recursive_doubling", "ring", "rabenseifner"},
    "gather": {"linear", "binomial"},
    "scatter": {"linear", "binomial"},
    "allgather": {"ring", "recursive_doubling", "bruck", "gather_bcast"},
    "reduce_scatter": {"ring", "recursive_halving", "pairwise", "reduce_scatterv"},
    "alltoall": {"pairwise", "bruck"},
    "barrier": {"linear", "binomial", "dissemination"},
}


@pytest.mark.mpi
def test_registry_holds_the_textbook_algorithms():
    for p, names in TABLE.items():
        have = set(mpicoll.algorithms(p))
        assert names | {"native"} <= have, (p, sorted(names - have))
        for a in names:
            doc = mpicoll.algorithm_info(p, a).__doc__
            assert "Cost" in doc and "α" in doc, (p, a)


@pytest.mark.mpi
def test_registry_entries_are_what_the_modules_registered():
    for p in mpicoll.PRIMITIVES:
        for a in mpicoll.algorithms(p):
            fn = mpicoll.algorithm_info(p, a)
            assert (fn.primitive, fn.algorithm) == (p, a)          # set by @register
            assert fn.__module__.startswith("mpicoll.coll."), (p, a, fn.__module__)
            assert fn.__doc__ and fn.__doc__.strip().splitlines()[0], (p, a)


@pytest.mark.mpi
def test_demo_textbook_formulas_name_registered_algorithms():
    from mpicoll.demo.textbook import TEXTBOOK
    for key in TEXTBOOK:
        p, a = key.split("/")
        assert a in mpicoll.algorithms(p), key


def raises_everywhere(fn, match, error_class=None):
    """The call must raise ArgumentError on every rank (never hang)."""
    with pytest.raises(mpicoll.ArgumentError, match=match) as info:
        fn()
    if error_class is not None:
        assert info.value.Get_error_class() == error_class
    return info.value


@pytest.mark.mpi
def test_selection_order(monkeypatch):
    x = np.ones(10)
    with mpicoll.traffic() as t:
        mpicoll.allreduce(x, algorithm="ring")
    assert t.calls[-1].algorithm == "ring"
    monkeypatch.setenv("MPICOLL_ALLREDUCE_ALGORITHM", "rabenseifner")
    with mpicoll.traffic() as t:
        mpicoll.allreduce(x)
        mpicoll.allreduce(x, algorithm="reduce_bcast")     # the argument wins
    assert [c.algorithm for c in t.calls] == ["rabenseifner", "reduce_bcast"]
    monkeypatch.setenv("MPICOLL_ALLREDUCE_ALGORITHM", "bogus")
    raises_everywhere(lambda: mpicoll.allreduce(x), "MPICOLL_ALLREDUCE_ALGORITHM.*valid: .*ring")
    monkeypatch.delenv("MPICOLL_ALLREDUCE_ALGORITHM")
    with mpicoll.traffic() as t:
        mpicoll.allreduce(x)
    assert t.calls[-1].algorithm == mpicoll.default_algorithm(
        "allreduce", size=N, nbytes=x.nbytes, count=x.size)


@pytest.mark.mpi
def test_unknown_algorithm_lists_valid_ones():
    e = raises_everywhere(lambda: mpicoll.bcast(np.zeros(3), algorithm="carrier_pigeon"),
                          "bcast has no algorithm 'carrier_pigeon'")
    for name in TABLE["bcast"]:
        assert name in str(e)


@pytest.mark.mpi
def test_non_commutative_refused_by_out_of_order_algorithms():
    x = np.ones(4, complex)
    for p, fn in (("allreduce", mpicoll.allreduce), ("reduce", mpicoll.reduce)):
        for name in mpicoll.algorithms(p):
            if mpicoll.algorithm_info(p, name).commutative_only:
                e = raises_everywhere(lambda fn=fn, name=name: fn(x, op=AFFINE, algorithm=name),
                                      "commutative")
                assert "recursive_doubling" in str(e) or "binomial" in str(e)
    raises_everywhere(lambda: mpicoll.reduce_scatter_block(np.ones(N, complex), op=AFFINE,
                                                           algorithm="ring"),
                      "reduce_scatterv")
    # auto picks an algorithm that keeps rank order
    y = mpicoll.allreduce(np.ones(4096, complex), op=AFFINE)
    assert y.shape == (4096,)


@pytest.mark.mpi
def test_bad_input_every_rank():
    x = np.arange(6.0)
    raises_everywhere(lambda: mpicoll.bcast(x, root=N),
                      rf"root: expected a rank in \[0, {N - 1}\]", MPI.ERR_ROOT)
    raises_everywhere(lambda: mpicoll.bcast(x, root=-1), "root", MPI.ERR_ROOT)
    with pytest.raises(TypeError, match="root: expected an integer"):
        mpicoll.reduce(x, root="0")
    raises_everywhere(lambda: mpicoll.allreduce(x, op=MPI.BAND),
                      "BAND is defined for signed integer, unsigned integer data; "
                      "got dtype float64",
                      MPI.ERR_OP)
    raises_everywhere(lambda: mpicoll.allreduce(np.ones(3, complex), op=MPI.MAX), "MAX",
                      MPI.ERR_OP)
    raises_everywhere(lambda: mpicoll.allreduce(x, op=MPI.MAXLOC), "MAXLOC")
    with pytest.raises(TypeError, match="op: expected an mpi4py.MPI.Op"):
        mpicoll.allreduce(x, op="sum")
    raises_everywhere(lambda: mpicoll.allreduce(x, np.empty(5)), "recvbuf: expected 6 elements",
                      MPI.ERR_COUNT)
    raises_everywhere(lambda: mpicoll.allreduce(x, np.empty(6, np.float32)),
                      "recvbuf: expected dtype float64", MPI.ERR_TYPE)
    ro = np.empty(6)
    ro.flags.writeable = False
    raises_everywhere(lambda: mpicoll.allreduce(x, ro), "recvbuf: expected a writable array")
    raises_everywhere(lambda: mpicoll.allreduce(x, np.empty(12)[::2]), "C-contiguous")
    raises_everywhere(lambda: mpicoll.allreduce(x.astype(">f8")), "byte-swapped")
    raises_everywhere(lambda: mpicoll.allreduce(np.array(["a", "b"])), "numeric or bool dtype")
    with pytest.raises(TypeError, match="sendbuf: expected a NumPy or CuPy array; got list"):
        mpicoll.allreduce([1, 2, 3])
    raises_everywhere(lambda: mpicoll.gather(x, np.empty(N * 6 + 1)),
                      f"recvbuf: expected {6 * N} elements")
    raises_everywhere(lambda: mpicoll.reduce_scatter(np.ones(5), None, [1] * (N + 1)),
                      f"recvcounts: expected {N} counts")
    raises_everywhere(lambda: mpicoll.reduce_scatter(np.ones(5), None, [-1] + [1] * (N - 1)),
                      r"recvcounts\[0\]")
    raises_everywhere(lambda: (mpicoll.alltoall(np.ones(N + 1)) if N > 1
                               else mpicoll.alltoall(np.ones(3), np.ones(2))),
                      "expected")
    raises_everywhere(lambda: mpicoll.scatter(np.ones(N), None),
                      "recvbuf: expected an array to receive")
    with pytest.raises(TypeError, match="comm: expected an mpi4py.MPI.Intracomm"):
        mpicoll.barrier(comm="world")


@pytest.mark.mpi
def test_one_bad_rank_raises_everywhere_and_writes_nothing():
    """Only the root's recvbuf is wrong: every rank raises, no rank's buffers change."""
    root = N - 1
    x = np.arange(4.0) + RANK
    keep = x.copy()
    recv = np.full(4 * N - (1 if RANK == root else 0), -1.0)
    e = raises_everywhere(lambda: mpicoll.gather(x, recv if RANK == root else None, root),
                          "recvbuf")
    if RANK != root:
        assert f"rank(s) {root}" in str(e)
    assert np.array_equal(x, keep) and (recv == -1).all()
    # the library is still usable afterwards
    assert mpicoll.allreduce(np.ones(2))[0] == N


@pytest.mark.mpi
def test_unknown_array_types_get_a_clear_error():
    class NotAnArray:               # looks like an array (shape, dtype) but is neither kind
        shape, dtype = (3,), np.dtype("f8")
    raises_everywhere(lambda: mpicoll.allreduce(NotAnArray()),
                      "sendbuf: expected a NumPy or CuPy array; got .*NotAnArray")


@pytest.mark.mpi
def test_shapes_of_allocated_results():
    x = np.ones((2, 3), np.int32)
    assert mpicoll.allreduce(x).shape == (2, 3)
    assert mpicoll.allgather(x).shape == (N, 2, 3)
    g = mpicoll.gather(x, root=0)
    assert (g.shape == (N, 2, 3)) if RANK == 0 else g is None
    assert mpicoll.reduce_scatter_block(np.ones((N, 4))).shape == (4,)
    assert mpicoll.alltoall(np.ones((N, 2))).shape == (N, 2)


@pytest.mark.mpi
def test_traffic_counts_ring_allreduce():
    """The seed's 2(N-1)K/N per rank, exactly, for a count divisible by N."""
    k = 12 * N
    with mpicoll.traffic() as t:
        mpicoll.allreduce(np.ones(k), algorithm="ring")
    call = t.calls[0]
    assert call.sent_elements == 2 * (N - 1) * k // N == call.recv_elements
    assert call.sent_msgs == 2 * (N - 1)
    with mpicoll.traffic() as t:
        mpicoll.allreduce(np.ones(k), algorithm="native")
    assert t.calls[0].sent_bytes == 0


@pytest.mark.mpi
def test_check_mode_env(monkeypatch):
    monkeypatch.setenv("MPICOLL_CHECK", "local")
    assert mpicoll.allreduce(np.ones(2))[0] == N
    with pytest.raises(mpicoll.ArgumentError, match="root"):
        mpicoll.bcast(np.ones(2), root=N)
    monkeypatch.setenv("MPICOLL_CHECK", "banana")
    with pytest.raises(mpicoll.ArgumentError, match="MPICOLL_CHECK"):
        mpicoll.allreduce(np.ones(2))
