"""Node-aware (hierarchical) algorithms on simulated node layouts, and the layout itself.

The generated matrix (test_matrix.py) runs ``hierarchical`` on whatever
layout the suite was launched with (tests/test_mpi_suite.py sets
``MPICOLL_NODES`` at some sizes; a netns cluster gives real nodes). Here each
test makes communicators under several layouts (``MPICOLL_NODES`` is read
when a communicator's private duplicate is made): blocks, uneven nodes,
round-robin placement, one rank per node — every option variant, every root,
results against NumPy computed on the rank, in rank order.
"""
import os

import numpy as np
import pytest
from mpi4py import MPI
from refdata import OPS, data, on_nodes, reduce_ref

import mpicoll
from mpicoll.core.topology import layout, parse_nodes
from mpicoll.engine.context import private_comm

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()

VARIANTS = ["hierarchical", "hierarchical:intra=linear", "hierarchical:intra=shm"]
INTER = {"allreduce": ("ring", "rabenseifner", "reduce_bcast"),
         "reduce": ("linear", "rabenseifner"),
         "bcast": ("linear", "pipeline", "scatter_allgather"),
         "allgather": ("ring", "gatherv_bcast")}


def layouts():
    """MPICOLL_NODES values valid at this N: blocks, uneven, round robin, one per node."""
    specs = ["1", "2", "cyclic:2"]
    if N >= 3:
        specs.append(",".join(["1", str(N - 2), "1"]))
    if N >= 5:
        specs.append("cyclic:3")
    return specs


def nodes(spec):
    """A fresh communicator whose ranks are on the nodes ``spec`` describes."""
    return on_nodes(spec, comm)


def check_all(c, algo, counts=(0, 1, 2 * N + 1), dt="float64", opname="SUM"):
    op = OPS[opname]
    lay = layout(private_comm(c))
    if algo.endswith("intra=shm") and lay.memory_split():
        # A simulated node across real hosts (netns nodes): refused, on every rank.
        with pytest.raises(mpicoll.ArgumentError, match="shared-memory domains"):
            mpicoll.allreduce(data(RANK, 3, dt, opname), op=op, comm=c, algorithm=algo)
        return
    for n in counts:
        mine = data(RANK, n, dt, opname)
        every = [data(r, n, dt, opname) for r in range(N)]
        red = reduce_ref(every, opname, dt)
        what = f"{algo} {lay.describe()} count={n} dtype={dt} op={opname}"
        got = mpicoll.allreduce(mine, op=op, comm=c, algorithm=algo)
        assert np.array_equal(got, red), what
        buf = mine.copy()
        mpicoll.allreduce(MPI.IN_PLACE, buf, op, comm=c, algorithm=algo)
        assert np.array_equal(buf, red), what + " in place"
        for root in (range(N) if n < 1000 else sorted({0, N - 1})):
            res = mpicoll.reduce(mine, None, op, root, comm=c, algorithm=algo)
            if RANK == root:
                assert np.array_equal(res, red), f"{what} reduce root={root}"
                buf = mine.copy()
                mpicoll.reduce(MPI.IN_PLACE, buf, op, root, comm=c, algorithm=algo)
                assert np.array_equal(buf, red), f"{what} reduce in place root={root}"
            else:
                assert res is None
                mpicoll.reduce(mine, None, op, root, comm=c, algorithm=algo)
            if opname == "SUM":
                buf = mine.copy() if RANK == root else np.zeros(n, dt)
                mpicoll.bcast(buf, root, comm=c, algorithm=algo)
                assert np.array_equal(buf, every[root]), f"{what} bcast root={root}"
        if opname == "SUM":
            want = np.array(every).reshape(N, n)
            got = mpicoll.allgather(mine, comm=c, algorithm=algo)
            assert np.array_equal(got, want), what + " allgather"
            buf = np.zeros((N, n), dt)
            buf[RANK] = mine
            mpicoll.allgather(MPI.IN_PLACE, buf, comm=c, algorithm=algo)
            assert np.array_equal(buf, want), what + " allgather in place"


@pytest.mark.mpi
@pytest.mark.parametrize("spec", layouts())
def test_every_variant_on_every_layout(spec):
    with nodes(spec) as c:
        lay = layout(private_comm(c))
        assert list(lay.nodes) == _renumber(parse_nodes(spec, N))
        for algo in VARIANTS:
            check_all(c, algo)
        # Above 64 KiB the default inter algorithms change (bandwidth-bound ones).
        check_all(c, "hierarchical", counts=(9000,))
        # A commutative user op and a non-exact integer op through the same phases.
        check_all(c, "hierarchical", counts=(1, 7), dt="int32", opname="PROD")
        check_all(c, "hierarchical", counts=(3,), dt="float64", opname="USER_ADD")


@pytest.mark.mpi
@pytest.mark.parametrize("primitive", sorted(INTER))
def test_every_inter_algorithm(primitive):
    """Each flat algorithm named as ``inter`` runs among the leaders of uneven nodes."""
    spec = "2" if N < 3 else ",".join(["1", str(N - 2), "1"])
    with nodes(spec) as c:
        for inter in INTER[primitive]:
            algo = f"hierarchical:inter={inter}"
            for n in (0, 5, 40000):
                mine = data(RANK, n, "float64", "SUM")
                every = [data(r, n, "float64", "SUM") for r in range(N)]
                what = f"{primitive} {algo} count={n}"
                if primitive == "allreduce":
                    got = mpicoll.allreduce(mine, comm=c, algorithm=algo)
                    assert np.array_equal(got, reduce_ref(every, "SUM", "float64")), what
                elif primitive == "reduce":
                    root = N - 1
                    got = mpicoll.reduce(mine, None, MPI.SUM, root, comm=c, algorithm=algo)
                    if RANK == root:
                        assert np.array_equal(got, reduce_ref(every, "SUM", "float64")), what
                elif primitive == "bcast":
                    root = N // 2
                    buf = mine.copy() if RANK == root else np.zeros(n)
                    mpicoll.bcast(buf, root, comm=c, algorithm=algo)
                    assert np.array_equal(buf, every[root]), what
                else:
                    got = mpicoll.allgather(mine, comm=c, algorithm=algo)
                    assert np.array_equal(got, np.array(every).reshape(N, n)), what


@pytest.mark.mpi
def test_non_commutative_keeps_rank_order_on_blocks():
    """AFFINE (associative, not commutative): rank order through all three phases."""
    for spec in ("1", "2", ",".join(["1", str(max(N - 2, 1)), "1"]) if N >= 3 else "1"):
        with nodes(spec) as c:
            for algo in ("hierarchical", "hierarchical:intra=linear"):
                check_all(c, algo, counts=(1, 2 * N + 1), dt="complex128", opname="AFFINE")


@pytest.mark.mpi
def test_non_commutative_refused_on_round_robin_nodes():
    if N < 3:
        pytest.skip("round-robin placement differs from blocks only at N >= 3")
    x = data(RANK, 4, "complex128", "AFFINE")
    with nodes("cyclic:2") as c:
        for prim in ("allreduce", "reduce"):
            with pytest.raises(mpicoll.ArgumentError) as err:
                if prim == "allreduce":
                    mpicoll.allreduce(x, op=OPS["AFFINE"], comm=c, algorithm="hierarchical")
                else:
                    mpicoll.reduce(x, None, OPS["AFFINE"], 0, comm=c, algorithm="hierarchical")
            msg = str(err.value)
            assert "blocks of consecutive ranks" in msg and "[0 2" in msg, msg
        # Nothing was sent: the communicator still works, with a commutative op.
        got = mpicoll.allreduce(np.ones(3), comm=c, algorithm="hierarchical")
        assert np.array_equal(got, np.full(3, float(N)))


@pytest.mark.mpi
@pytest.mark.parametrize("bad, words", [
    ("hierarchical:inter=native", "inter must be a flat allreduce algorithm"),
    ("hierarchical:inter=hierarchical", "inter must be a flat allreduce algorithm"),
    ("hierarchical:intra=ring", "intra must be one of binomial, linear"),
    ("hierarchical:depth=2", "unknown option(s) depth"),
    ("hierarchical:inter", "expected options as 'key=value"),
    ("ring:inter=ring", "takes no options"),
])
def test_bad_options_fail_on_every_rank(bad, words):
    with pytest.raises(mpicoll.ArgumentError) as err:
        mpicoll.allreduce(np.ones(2), algorithm=bad)
    assert words in str(err.value), str(err.value)
    assert np.array_equal(mpicoll.allreduce(np.ones(2), algorithm="hierarchical"), np.full(2, N))


@pytest.mark.mpi
def test_options_reach_p2pcomm_and_the_environment():
    want = np.full(5, float(N))
    with nodes("2") as c:
        pc = mpicoll.P2PComm(c, allreduce="hierarchical:inter=ring,intra=linear")
        got = np.empty(5)
        pc.Allreduce(np.ones(5), got)
        assert np.array_equal(got, want)
        old = os.environ.get("MPICOLL_ALLREDUCE_ALGORITHM")
        os.environ["MPICOLL_ALLREDUCE_ALGORITHM"] = "hierarchical:intra=linear"
        try:
            with mpicoll.traffic() as t:
                got = mpicoll.allreduce(np.ones(5), comm=c)
        finally:
            if old is None:
                del os.environ["MPICOLL_ALLREDUCE_ALGORITHM"]
            else:
                os.environ["MPICOLL_ALLREDUCE_ALGORITHM"] = old
        assert np.array_equal(got, want)
        assert t.calls[0].algorithm == "hierarchical:intra=linear"


@pytest.mark.mpi
def test_traffic_splits_intra_and_inter_node():
    """Only node leaders cross nodes in hierarchical allreduce; the flat ring's every rank does."""
    if N < 3:
        pytest.skip("needs two nodes with more than one rank somewhere")
    n = 1000
    with nodes("2") as c:
        lay = layout(private_comm(c))
        with mpicoll.traffic() as t:
            mpicoll.allreduce(np.ones(n), comm=c, algorithm="hierarchical")
            mpicoll.allreduce(np.ones(n), comm=c, algorithm="ring")
        h, ring = t.calls
        leader = RANK in lay.leaders
        assert (h.inter_sent_msgs > 0) == leader, (RANK, h)
        assert h.intra_sent_msgs + h.inter_sent_msgs == h.sent_msgs
        assert h.intra_sent_bytes + h.inter_sent_bytes == h.sent_bytes
        # The ring: rank r sends to r + 1, which is on another node exactly at node ends.
        crosses = lay.nodes[RANK] != lay.nodes[(RANK + 1) % N]
        assert (ring.inter_sent_msgs == ring.sent_msgs) if crosses else ring.inter_sent_msgs == 0
        # Every byte sent across nodes was received across nodes.
        sent = c.allreduce(h.inter_sent_bytes + ring.inter_sent_bytes)
        recv = c.allreduce(h.inter_recv_bytes + ring.inter_recv_bytes)
        assert sent == recv
        d = h.as_dict()
        assert d["intra_sent_bytes"] + d["inter_sent_bytes"] == d["sent_bytes"]


@pytest.mark.mpi
def test_layout_from_shared_memory_or_environment():
    """The layout every rank holds equals the nodes MPI reports (or MPICOLL_NODES names)."""
    lay = layout(private_comm(comm))
    every = comm.allgather(lay.nodes)
    assert all(e == lay.nodes for e in every)
    spec = os.environ.get("MPICOLL_NODES", "").strip()
    if spec:
        assert list(lay.nodes) == _renumber(parse_nodes(spec, N))
        return
    # Independently of mpicoll.core.topology: the world ranks of my shared-memory group.
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        mates = local.Get_group().Translate_ranks(list(range(local.Get_size())), comm.Get_group())
    finally:
        local.Free()
    assert sorted(mates) == [r for r in range(N) if lay.nodes[r] == lay.nodes[RANK]]


@pytest.mark.mpi
def test_bad_node_spec_fails_on_every_rank():
    for spec in ("0", "x", "cyclic:0", f"{N},1"):
        with pytest.raises(mpicoll.ArgumentError) as err:
            with nodes(spec):
                pass
        assert "MPICOLL_NODES" in str(err.value), str(err.value)


def _renumber(nodes):
    first = {}
    return [first.setdefault(n, len(first)) for n in nodes]


@pytest.mark.mpi(min_size=2)
def test_node_specs_that_differ_between_ranks_fail_on_every_rank():
    """Each rank reads MPICOLL_NODES itself (``mpiexec -n 1 -env MPICOLL_NODES 1 : -n 4
    -env MPICOLL_NODES 2``): ranks with different layouts would build different plans and
    wait for each other forever. A value that differs, or is junk on one rank only
    (that rank alone failed, the others waited), raises on every rank, naming them.
    """
    last = N - 1
    for mine, want in (("1" if RANK == 0 else "2", r"'1' on rank\(s\) 0; '2' on rank\(s\) 1"),
                       ("x" if RANK == last else "2", rf"'x' on rank\(s\) {last}"),
                       ("" if RANK == last else "2", rf"unset on rank\(s\) {last}")):
        with pytest.raises(mpicoll.ArgumentError, match=want) as err:
            with nodes(mine):
                pass
        assert "every rank must give the same value" in str(err.value)
    with nodes("2") as c:                         # and a good one afterwards works
        check_all(c, "hierarchical", counts=(3,))


def _world_nodes(spec):
    """The node of each COMM_WORLD rank under ``spec``, computed here from its definition."""
    if spec.startswith("cyclic:"):
        return [r % int(spec[7:]) for r in range(N)]
    if "," in spec:
        return [n for n, k in enumerate(map(int, spec.split(","))) for _ in range(k)]
    return [r // int(spec) for r in range(N)]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("spec", layouts())
def test_a_sub_communicator_sees_its_processes_on_their_world_nodes(monkeypatch, spec):
    """Simulated nodes hold processes, as real ones do: a Split (ranks reordered) and
    COMM_SELF see each process on its node in the world, and node sizes ``a,b,c`` that
    sum to the world's size do not make calls on smaller communicators fail.
    """
    monkeypatch.setenv("MPICOLL_NODES", spec)
    world = _world_nodes(spec)
    sub = comm.Split(RANK % 2, N - RANK)            # reversed order inside each half
    try:
        members = sub.allgather(RANK)              # the world rank of each sub rank
        lay = layout(private_comm(sub))
        assert list(lay.nodes) == _renumber([world[w] for w in members]), lay.describe()
        x = np.arange(5.0) + RANK
        for algo in ("recursive_doubling", "hierarchical"):
            got = mpicoll.allreduce(x, comm=sub, algorithm=algo)
            np.testing.assert_array_equal(got, sub.allreduce(x), err_msg=f"{algo} {spec}")
        self_ = MPI.COMM_SELF.Dup()
        try:
            np.testing.assert_array_equal(mpicoll.allreduce(x, comm=self_, algorithm="ring"), x)
        finally:
            self_.Free()
    finally:
        sub.Free()


@pytest.mark.mpi(min_size=3)                       # (cyclic:2 on 2 ranks is blocks of one)
def test_auto_does_not_take_a_tuned_node_aware_choice_that_cannot_run(monkeypatch, tmp_path):
    """A tuning table measured on block-placed nodes names ``hierarchical``; on
    round-robin nodes with a non-commutative op it cannot keep rank order (it refuses
    when asked by name). ``auto`` then takes the rules' choice instead of refusing.
    """
    import json

    from mpicoll.core import defaults as _defaults
    table = tmp_path / f"table-{RANK}.json"
    table.write_text(json.dumps({"format": _defaults.TABLE_FORMAT, "rules": {
        p: {str(N): [{"max_nbytes": None, "algorithm": "hierarchical"}]}
        for p in ("allreduce", "reduce")}}))
    monkeypatch.setenv("MPICOLL_TUNING", str(table))
    op = OPS["AFFINE"]
    mine = data(RANK, 4, "complex128", "AFFINE")
    want = reduce_ref([data(r, 4, "complex128", "AFFINE") for r in range(N)], "AFFINE",
                      "complex128")
    with nodes("cyclic:2") as c:
        with pytest.raises(mpicoll.ArgumentError, match="consecutive"):
            mpicoll.allreduce(mine, op=op, comm=c, algorithm="hierarchical")
        np.testing.assert_array_equal(mpicoll.allreduce(mine, op=op, comm=c), want)
        got = mpicoll.reduce(mine, None, op, N - 1, comm=c)
        if RANK == N - 1:
            np.testing.assert_array_equal(got, want)
    with nodes("1") as c:                          # where it can run, the table's choice stands
        np.testing.assert_array_equal(mpicoll.allreduce(mine, op=op, comm=c), want)
