"""The registry is the single source: one decorated function puts an algorithm everywhere.

A toy allreduce, registered at run time from a file (``--import``), must show
up with correct results in the demo (walkthrough and traffic table, checked
against its recorded plan, "—" for the textbook it lacks) and in the bench
(sweep, ``fit`` through its plan-derived model, ``tune``, ``predict``),
with no table anywhere edited for it; one that cannot be recorded as a plan
still runs, with "—"/model "none" where a plan is missing. Registering a
name twice is an error.
Serial pytest; MPI jobs through ``launch.run_mpi``.
"""
import json
import re
import sys

import pytest
from launch import run_mpi
from test_demo import by_rank, check_table, check_walk, parse_printed, parse_table

import mpicoll
from mpicoll.bench.formula_prices import COSTS, cost
from mpicoll.bench.plan_prices import plan_cost
from mpicoll.core.registry import _REGISTRY, register

TIMEOUT = 300
N = 3

TOY = '''
from mpicoll.core.registry import register


@register("allreduce", "toy_linear")
def allreduce_toy_linear(ctx, sendbuf, recvbuf, op):
    """Test only: every rank sends its vector to rank 0, which reduces in rank order and
    sends the result back."""
    ctx.copy(recvbuf, sendbuf)
    if ctx.rank == 0:
        tmp = ctx.scratch(recvbuf.size)
        for r in range(1, ctx.size):
            ctx.recv(tmp, r)
            ctx.copy(recvbuf, ctx.reduce(recvbuf, tmp, recvbuf))   # lower ranks first
        for r in range(1, ctx.size):
            ctx.send(recvbuf, r)
    else:
        ctx.send(recvbuf, 0)
        ctx.recv(recvbuf, 0)
'''


#: An algorithm that does more than ctx records (it writes an element itself): it runs
#: directly, without a plan; the demo and fit must still take it, saying what they lack.
DIRECT = '''
from mpicoll.core.registry import register, lookup
_ring = lookup("allreduce", "ring")


@register("allreduce", "direct_ring")
def direct_ring(ctx, sendbuf, recvbuf, op):
    """Test only: the ring, then an element written back to itself (no plan records that)."""
    _ring(ctx, sendbuf, recvbuf, op)
    if recvbuf.size:
        recvbuf[0] = recvbuf[0]
'''


@pytest.fixture
def toy(tmp_path):
    (tmp_path / "toy.py").write_text(TOY)
    (tmp_path / "direct.py").write_text(DIRECT)
    return tmp_path


def mpi(args, cwd):
    proc = run_mpi(N, [sys.executable, "-m"] + [str(a) for a in args], timeout=TIMEOUT,
                   cwd=str(cwd))
    assert proc.returncode == 0, \
        f"exit {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


# -- registry ------------------------------------------------------------------

def test_duplicate_registration_is_refused():
    def first(ctx, sendbuf, recvbuf, op):
        """Test only."""

    def second(ctx, sendbuf, recvbuf, op):
        """Test only."""
    try:
        register("allreduce", "test_duplicate")(first)
        with pytest.raises(mpicoll.ArgumentError,
                           match="register: allreduce algorithm 'test_duplicate' is already "
                                 "registered"):
            register("allreduce", "test_duplicate")(second)
        assert mpicoll.algorithm_info("allreduce", "test_duplicate") is first
    finally:
        _REGISTRY["allreduce"].pop("test_duplicate", None)
    ring = mpicoll.algorithm_info("allreduce", "ring")
    with pytest.raises(ValueError, match="'ring' is already registered"):
        register("allreduce", "ring")(second)
    assert mpicoll.algorithm_info("allreduce", "ring") is ring      # the built-in stays


def test_plan_model_matches_the_formulas_at_powers_of_two():
    """The fallback model of an algorithm without a formula, tried on those with one."""
    a, b, g = 2e-6, 1e-10, 2e-10
    for p, table in COSTS.items():
        for alg in table:
            if (p, alg) == ("bcast", "pipeline"):
                continue        # its fill time is a chain's, not one rank's load
            for n in (2, 4, 8):
                nb = 0 if p == "barrier" else 4096 * n
                want = cost(p, alg, n, nb, a, b, g)
                got = plan_cost(p, alg, n, nb, a, b, g)
                assert got == pytest.approx(want, rel=1e-9), (p, alg, n)


# -- the toy algorithm everywhere -----------------------------------------------

def test_toy_algorithm_in_the_demo(toy):
    out = mpi(["mpicoll.demo", "--import", "toy.py", "--import", "direct.py",
               "--sleep-scale", "0"],
              toy)
    # The demo's traffic table shows its own list of primitives (the vector collectives
    # and the scans are not in the demo yet).
    from mpicoll.demo.cli import TABLE
    algos = {p: [a for a in mpicoll.algorithms(p) if a != "native"] for p in TABLE}
    algos["allreduce"].append("toy_linear")
    check_walk(out, N)
    rows = check_table(out, N, algos=algos)          # every row: measured == plan, ok
    row = rows[("allreduce", "toy_linear")]
    k = row["k"]
    assert row["claim"] == "—"                       # no textbook formula for it
    assert row["measured"] == [(N - 1) * k] + [k] * (N - 1)
    assert row["msgs"] == [N - 1] + [1] * (N - 1)
    ring = rows[("allreduce", "ring")]
    measured, msgs = " ".join(map(str, ring["measured"])), " ".join(map(str, ring["msgs"]))
    block = out.split("\n  allreduce, K=5\n", 1)[1].split("\n  bcast", 1)[0]
    assert re.search(rf"^    direct_ring\s+exact —\s+\| measured {measured}\s+\| msgs {msgs}"
                     r"\s+\| ok\n      — \(no plan: the algorithm runs unrecorded\)$",
                     block, re.M), out
    assert out.rstrip().endswith("all checks passed ok")

    out = mpi(["mpicoll.demo", "--import", "toy.py", "--only", "allreduce",
               "--algorithm", "allreduce=toy_linear"], toy)
    assert "all_reduce: sum of [rank+1]*K on every rank (dist.all_reduce, SUM), " \
           "algorithm toy_linear" in out
    after = by_rank(parse_printed(out), "After", "all_reduce")
    assert all(list(after[r]) == [N * (N + 1) / 2] * 5 for r in range(N)), after
    assert set(parse_table(out)) == {("allreduce", "toy_linear")}


def test_toy_algorithm_in_the_bench(toy):
    out = mpi(["mpicoll.bench", "allreduce", "-b", "8", "-e", "4K", "-f", "8", "-n", "2",
               "-w", "1", "--import", "toy.py", "-J", "sweep.jsonl", "--no-memcpy"], toy)
    with open(toy / "sweep.jsonl") as f:
        res = [r for r in map(json.loads, f) if r["type"] == "result"]
    mine = [r for r in res if r["algorithm"] == "toy_linear"]
    assert mine and {r["bytes"] for r in mine} == {r["bytes"] for r in res}
    assert all(r["wrong"] == 0 and r["checked"] for r in mine), mine
    assert "toy_linear" in out and "Out of bounds values : 0 OK" in out

    out = mpi(["mpicoll.bench", "fit", "-b", "8", "-e", "512", "-f", "64", "-n", "2", "-w", "1",
               "--primitive", "allreduce", "--fit-maxbytes", "16K", "--import", "toy.py",
               "--import", "direct.py", "-o", "model.json"], toy)
    with open(toy / "model.json") as f:
        rows = json.load(f)["comparison"]
    toy_rows = [r for r in rows if r["algorithm"] == "toy_linear"]
    assert toy_rows and all(r["model"] == "plan" and r["predicted_us"] > 0 for r in toy_rows)
    direct = [r for r in rows if r["algorithm"] == "direct_ring"]
    assert direct and all(r["model"] == "none" and r["predicted_us"] is None for r in direct)
    # Node-aware algorithms are priced from their plans on the run's layout (two-level model).
    assert {r["model"] for r in rows if r["algorithm"] == "hierarchical"} == {"plan"}
    # The shm algorithms read peers' memory: no message to price.
    assert {r["model"] for r in rows if r["algorithm"] == "shm"} == {"none"}
    assert {r["model"] for r in rows if r["algorithm"] not in (
        "toy_linear", "direct_ring", "hierarchical", "shm")} == {"formula"}
    planned = re.search(r"# model plan \(no declared formula\): ([^\n]*)", out)
    assert planned and "allreduce/toy_linear," in planned.group(1), out

    mpi(["mpicoll.bench", "tune", "-b", "8", "-e", "1K", "-f", "32", "-n", "2", "-w", "1",
         "--primitive", "allreduce", "--import", "toy.py", "-o", "table.json"], toy)
    with open(toy / "table.json") as f:
        table = json.load(f)
    assert all("toy_linear" in m["median_us"] for m in table["measurements"]["allreduce"][str(N)])

    import subprocess
    proc = subprocess.run([sys.executable, "-m", "mpicoll.bench", "predict", "--ranks", "2..128",
                           "--bytes", "8,1M", "--primitive", "allreduce", "--import", "toy.py",
                           "--json", "pred.json"], cwd=str(toy), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert "toy_linear: no declared formula; modelled from the recorded plans " \
           "for N <= 64; left out above" in proc.stdout
    with open(toy / "pred.json") as f:
        pred = json.load(f)["primitives"]["allreduce"]
    assert pred["plan_modelled"]["algorithms"] == ["hierarchical", "toy_linear"]
