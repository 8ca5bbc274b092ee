"""The two-level cost model: ``bench fit`` measures both levels, ``predict --ranks-per-node``.

Serial and fast (model arithmetic and recorded plans at small N); one short
``fit`` under mpiexec on simulated nodes (MPICOLL_NODES). No timing
thresholds: only the model's arithmetic and what the bench writes.
"""
import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest
from launch import run_mpi

import mpicoll
from mpicoll.bench.formula_prices import COSTS, cost2, link_split
from mpicoll.bench.model import hand_written, model_time2
from mpicoll.bench.plan_prices import (
    Levels,
    block_layout,
    count_of,
    hierarchical_inter,
    hierarchical_time,
    layout_plans,
    plan_cost,
    plan_time2,
)
from mpicoll.coll.hierarchical import SMALL, split_of
from mpicoll.core.topology import Layout
from mpicoll.sched.inspect import plan_of

PY = sys.executable
BENCH = [PY, "-m", "mpicoll.bench"]
HAS_MPL = importlib.util.find_spec("matplotlib") is not None

#: inter-node links far slower than intra-node ones, and a node link its ranks share
SLOW_INTER = Levels(alpha_intra=2e-7, beta_intra=2e-11, alpha_inter=5e-6, beta_inter=5e-10,
                    gamma=1e-10, link_alpha=5e-6, link_beta=5e-10)


def serial(args, tmp):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(BENCH + [str(a) for a in args], cwd=str(tmp), env=env,
                          capture_output=True, text=True, timeout=300)


# (a) ----------------------------------------------------------------------------------

def test_hierarchical_allreduce_beats_flat_when_inter_node_links_are_slow(tmp_path):
    lv = SLOW_INTER
    args = ["predict", "--ranks", "2..64", "--bytes", "8", "--ranks-per-node", "8",
            "--primitive", "allreduce", "--gamma", lv.gamma,
            "--alpha-intra", lv.alpha_intra, "--beta-intra", lv.beta_intra,
            "--alpha-inter", lv.alpha_inter, "--beta-inter", lv.beta_inter,
            "--link-alpha", lv.link_alpha, "--link-beta", lv.link_beta, "--json", "p.json"]
    if HAS_MPL:
        args += ["-o", "p.png"]
    proc = serial(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "p.json") as f:
        out = json.load(f)
    entry = out["two_level"]["8"]["primitives"]["allreduce"]["by_ranks"][0]
    assert entry["bytes"] == 8
    row = next(t for t in entry["hierarchical_vs_flat"]["table"] if t["nranks"] == 64)
    assert row["hierarchical_us"] < row["best_flat_us"] and row["speedup"] > 1
    flat = [a for a in hand_written("allreduce") if a != "hierarchical"]
    times = {a: model_time2("allreduce", a, 64, 8, 8, lv) for a in flat + ["hierarchical"]}
    assert times["hierarchical"] < min(times[a] for a in flat)
    # On one node (N <= 8) a flat algorithm wins; hierarchical takes over past it.
    hv = entry["hierarchical_vs_flat"]["pow2"]
    assert hv["segments"][0][2] == "flat" and hv["segments"][-1][2] == "hierarchical"
    assert hv["crossovers"] and 8 < hv["crossovers"][0] <= 64
    assert entry["crossovers"] and entry["pow2"]["segments"][-1][2] == "hierarchical"
    assert "hierarchical wins from: N = 16" in proc.stdout
    if HAS_MPL:
        assert (tmp_path / "p.png").stat().st_size > 0


def test_without_link_sharing_recursive_doubling_is_already_node_aware():
    """With every message priced alone (no shared node link), recursive doubling on blocks
    of 2^k ranks crosses nodes only log2(N/K) times, as the hierarchical algorithm does,
    and skips its two intra phases: the per-message model alone never prefers it.
    """
    lv = SLOW_INTER._replace(link_alpha=0.0, link_beta=0.0)
    for N in (16, 64, 1024):
        rd = model_time2("allreduce", "recursive_doubling", N, 8, 8, lv)
        hier = model_time2("allreduce", "hierarchical", N, 8, 8, lv)
        assert rd < hier
        assert link_split("allreduce", "recursive_doubling", N, 8, 8)[0] == \
            int(math.log2(N // 8))


# (b) ----------------------------------------------------------------------------------

@pytest.mark.parametrize("prim", sorted(COSTS))
def test_equal_levels_give_the_one_level_model_exactly(prim):
    a, b, g, o = 3e-6, 2e-10, 1e-10, 5e-6
    lv = Levels(a, b, a, b, g, overhead=o)
    for al, formula in COSTS[prim].items():
        for N in (2, 3, 7, 8, 12, 64, 100, 1000, 4096, 10000):
            for K in (1, 3, 8, 64):
                for nb in ((0,) if prim == "barrier" else (8, 65536, 1 << 24)):
                    assert model_time2(prim, al, N, K, nb, lv) == o + formula(N, nb, a, b, g)


def test_equal_levels_price_plans_as_the_one_level_plan_model():
    """Algorithms without a formula (priced from plans) too: every K, exactly."""
    a, b, g = 3e-6, 2e-10, 1e-10
    lv = Levels(a, b, a, b, g)
    for prim, al in (("allgatherv", "bruck"), ("scan", "recursive_doubling"),
                     ("alltoallv", "pairwise")):
        for N in (2, 5, 8, 12):
            for K in (1, 2, 3, 8):
                lay = block_layout(N, K)
                t2, t1 = plan_time2(layout_plans(prim, al, N, count_of(4096, 4), 4, None), 4,
                                    lay.nodes, lv)
                assert t2 == t1 == plan_cost(prim, al, N, 4096, a, b, g)


# (c) ----------------------------------------------------------------------------------

def test_hierarchical_allreduce_plan_price_is_the_sum_of_its_phases():
    """N = 6 on nodes [0 1 2][3 4 5]: the leaders' messages, read off their plans, are a
    binomial reduce in the node, an exchange between leaders, a binomial bcast.
    """
    lay = Layout([0, 0, 0, 1, 1, 1])
    count, itemsize = 256, 4
    n = count * itemsize
    plans = [plan_of("allreduce", "hierarchical", 6, r, count, itemsize=itemsize, layout=lay)
             for r in range(6)]
    assert list(plans[0].messages()) == [("recv", 1, count), ("recv", 2, count),
                                         ("send", 3, count), ("recv", 3, count),
                                         ("send", 2, count), ("send", 1, count)]
    assert list(plans[3].messages()) == [("recv", 4, count), ("recv", 5, count),
                                         ("send", 0, count), ("recv", 0, count),
                                         ("send", 5, count), ("send", 4, count)]
    for r in (1, 2, 4, 5):          # the others: one send up, one receive down, in the node
        assert [m[0] for m in plans[r].messages()] == ["send", "recv"]
        assert all(lay.same_node(r, m[1]) for m in plans[r].messages())
    lv = Levels(alpha_intra=1e-6, beta_intra=1e-10, alpha_inter=20e-6, beta_inter=2e-9,
                gamma=3e-10)
    reduce_phase = 2 * (lv.alpha_intra + n * lv.beta_intra + n * lv.gamma)
    inter_phase = lv.alpha_inter + n * lv.beta_inter + n * lv.gamma   # one sendrecv + reduce
    bcast_phase = 2 * (lv.alpha_intra + n * lv.beta_intra)
    expected = reduce_phase + inter_phase + bcast_phase
    got, _ = plan_time2(plans, itemsize, lay.nodes, lv)
    assert got == pytest.approx(expected, rel=1e-12)
    assert hierarchical_time("allreduce", 6, 3, n, lv, itemsize) == \
        pytest.approx(expected, rel=1e-12)
    assert hierarchical_inter("allreduce", n) == ("allreduce", "recursive_doubling")


@pytest.mark.parametrize("prim, inter, small, large, noncommutative", [
    ("allreduce", "allreduce", "recursive_doubling", "rabenseifner", "recursive_doubling"),
    ("reduce", "reduce", "binomial", "rabenseifner", "binomial"),
    ("bcast", "bcast", "binomial", "scatter_allgather", "scatter_allgather"),
    ("allgather", "allgatherv", "bruck", "ring", "ring"),
])
def test_each_node_aware_algorithm_declares_its_heads_default(prim, inter, small, large,
                                                             noncommutative):
    """The split on each ``hierarchical`` algorithm's register: its heads' primitive, the
    latency-bound algorithm up to SMALL bytes per rank, the bandwidth-bound one above (not
    for a non-commutative op where that one needs a commutative op).
    """
    split = split_of(prim)
    assert split is mpicoll.algorithm_info(prim, "hierarchical").split
    assert split.inter == inter
    picks = [split.default(nb, comm) for nb, comm in
             ((8, True), (SMALL, False), (SMALL, True), (SMALL + 1, True), (SMALL + 1, False))]
    assert [fn.algorithm for fn in picks] == [small, small, small, large, noncommutative]
    assert {fn.primitive for fn in picks} == {inter}
    assert hierarchical_inter(prim, SMALL + 1) == (inter, large)
    assert split_of("gather") is None


@pytest.mark.parametrize("prim", ["allreduce", "reduce", "bcast", "allgather"])
def test_hierarchical_phases_equal_its_plans_on_equal_blocks(prim):
    """Predict's shortcut (phases on K ranks and on N/K leaders) against pricing every
    rank's recorded plan, node links shared or not, small and large messages.
    """
    for lv in (SLOW_INTER, SLOW_INTER._replace(link_alpha=0.0, link_beta=0.0)):
        for N, K in ((8, 2), (16, 4), (32, 8), (32, 4)):
            for nb in (8, 1 << 18):
                lay = block_layout(N, K)
                plans = layout_plans(prim, "hierarchical", N, count_of(nb, 4), 4, lay)
                got, _ = plan_time2(plans, 4, lay.nodes, lv)
                assert hierarchical_time(prim, N, K, nb, lv) == pytest.approx(got, rel=1e-12)


@pytest.mark.parametrize("prim", sorted(COSTS))
def test_link_split_matches_the_plans_at_powers_of_two(prim):
    """cost2's split of each formula against pricing every rank's plan (no link sharing)."""
    lv = SLOW_INTER._replace(link_alpha=0.0, link_beta=0.0)
    one = SLOW_INTER._replace(alpha_inter=lv.alpha_intra, beta_inter=lv.beta_intra,
                              link_alpha=0.0, link_beta=0.0)
    for al in COSTS[prim]:
        if al == "pipeline":        # its formula is a chain's fill time, not a per-rank load
            continue
        for N, K in ((8, 1), (8, 2), (16, 4), (32, 8), (32, 2)):
            nb = 0 if prim == "barrier" else 4096
            lay = block_layout(N, K)
            plans = layout_plans(prim, al, N, count_of(nb, 4), 4, None)
            t2, t1 = plan_time2(plans, 4, lay.nodes, lv)
            added = cost2(prim, al, N, K, nb, lv) - cost2(prim, al, N, K, nb, one)
            assert added == pytest.approx(t2 - t1, rel=1e-9, abs=1e-15), (al, N, K)


# (d) ----------------------------------------------------------------------------------

def test_fit_on_two_simulated_nodes_writes_both_levels(tmp_path):
    proc = run_mpi(3, BENCH + ["fit", "-b", "8", "-e", "512", "-f", "64", "-n", "2", "-w", "1",
                               "--primitive", "allreduce", "--fit-maxbytes", "4K",
                               "-o", "model.json"],
                   timeout=300, cwd=str(tmp_path), env={"MPICOLL_NODES": "2"})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    with open(tmp_path / "model.json") as f:
        model = json.load(f)
    for key in ("alpha_intra_s", "beta_intra_s_per_byte", "alpha_inter_s",
                "beta_inter_s_per_byte", "link_alpha_s", "link_beta_s_per_byte",
                "alpha_s", "beta_s_per_byte"):
        assert model[key] >= 0, key
    assert model["layout"]["nodes"] == [0, 0, 1] and model["layout"]["n_nodes"] == 2
    assert model["levels"]["intra"].startswith("measured") and "0-1" in model["levels"]["intra"]
    assert model["levels"]["inter"].startswith("measured") and "0-2" in model["levels"]["inter"]
    assert model["levels"]["link"].startswith("not measured")   # node 1 has one rank
    # one-level alpha/beta: the inter-node pair's (documented choice)
    assert (model["alpha_s"], model["beta_s_per_byte"]) == \
        (model["alpha_inter_s"], model["beta_inter_s_per_byte"])
    assert model["pingpong"] == model["pingpong_inter"] and model["pingpong_intra"]
    rows = {r["algorithm"]: r for r in model["comparison"]}
    assert set(rows) == set(hand_written("allreduce")) - {"shm"}    # shm: skipped, two nodes
    assert rows["hierarchical"]["model"] == "plan" and rows["ring"]["model"] == "formula"
    assert all(r["predicted_us"] > 0 and r["error"] is not None for r in rows.values())
    assert "# two levels on 2 nodes: [0 1] [2]" in proc.stdout
    # predict reads it with both levels
    out = serial(["predict", "--model", "model.json", "--ranks", "2..32", "--bytes", "8",
                  "--ranks-per-node", "2", "--primitive", "allreduce"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"inter-node alpha = {model['alpha_inter_s'] * 1e6:.3g} us" in out.stdout


def test_a_one_level_model_gives_both_levels_its_alpha_beta(tmp_path):
    one = {"alpha_s": 4e-6, "beta_s_per_byte": 3e-10, "gamma_s_per_byte": 1e-10,
           "overhead_s": 0.0, "source": "old fit"}
    (tmp_path / "m.json").write_text(json.dumps(one))
    proc = serial(["predict", "--model", "m.json", "--ranks", "2..16", "--bytes", "8",
                   "--ranks-per-node", "4", "--primitive", "bcast", "--json", "p.json"],
                  tmp_path)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((tmp_path / "p.json").read_text())["model"]
    assert m["alpha_intra_s"] == m["alpha_inter_s"] == 4e-6
    assert m["beta_intra_s_per_byte"] == m["beta_inter_s_per_byte"] == 3e-10
    assert m["link_alpha_s"] == m["link_beta_s_per_byte"] == 0.0


def test_predict_help_states_the_approximation():
    proc = subprocess.run(BENCH + ["predict", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "--ranks-per-node" in text and "exact for N, K powers of two" in text
    assert "sum of their phases" in text


def test_registry_names_the_node_aware_algorithms():
    for prim in ("allreduce", "reduce", "bcast", "allgather"):
        assert "hierarchical" in mpicoll.algorithms(prim)
