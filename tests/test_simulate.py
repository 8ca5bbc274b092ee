"""The simulation's traces against the verified plans, and SMPI against the declared costs.

Serial. The trace checks need no SimGrid; the replays are skipped with the
reason where SimGrid is not installed (``.ci/run`` installs it).
"""
import json
import os

import pytest

from mpicoll import PRIMITIVES, algorithms
from mpicoll.bench.plan_prices import plannable
from mpicoll.coll.cost import Call
from mpicoll.core.blocks import split
from mpicoll.sched.inspect import plan_of
from mpicoll.simulate import calibrate, job, native, platforms, replay, traces
from mpicoll.verify.declared import cost_of

NO_SIMGRID = replay.available()
needs_simgrid = pytest.mark.skipif(NO_SIMGRID is not None, reason=str(NO_SIMGRID))

HAND = [(p, a) for p in PRIMITIVES for a in algorithms(p)
        if a != "native" and plannable(p, a)]


def _counts(p, N, count, matrix=False):
    """The counts of a call as plan_of takes them (``matrix``: as a Call's alltoallv does)."""
    if p == "reduce_scatter":
        return split(count, N)
    if p in ("gatherv", "scatterv", "allgatherv"):
        return [count] * N
    if p == "alltoallv":
        return [[count] * N for _ in range(N)] if matrix else [count] * N
    return None


def _parse(lines):
    """Per rank: the sends (dst, tag, bytes) and receives (src, tag, bytes), waits checked.

    Also checked: a rank has at most one send in flight to each peer (one at a time, in order,
    as on a connection: see mpicoll.simulate.traces).
    """
    sends, recvs, posted = [], [], set()
    for line in lines:
        f = line.split()
        action = f[1]
        if action in ("send", "isend", "recv", "irecv"):
            nbytes = 0 if f[4] == traces.ZERO_RECV else int(f[4])
            rec = (int(f[2]), int(f[3]), nbytes)
            (sends if "send" in action else recvs).append(rec)
            if action[0] == "i":
                me = int(f[0])
                if action == "isend":
                    assert not any(k[:2] == (me, rec[0]) for k in posted), \
                        f"two sends in flight to one peer: {line}"
                posted.add((me, rec[0], rec[1]) if action == "isend" else (rec[0], me, rec[1]))
        elif action == "wait":
            key = (int(f[2]), int(f[3]), int(f[4]))
            assert key in posted, f"wait for a request never posted: {line}"
            posted.remove(key)
        else:
            assert action == "sleep" and float(f[2]) > 0, line
    assert not posted, f"requests never waited for: {posted}"
    return sends, recvs


@pytest.mark.parametrize("primitive,algorithm", HAND)
@pytest.mark.parametrize("N", [1, 2, 3, 5, 8])
def test_traces_carry_the_plans_traffic(primitive, algorithm, N):
    """Every rank's trace sends and receives what its plan does, and the ranks' messages pair up.

    Per rank: message counts and bytes equal the plan's :meth:`~Plan.traffic`
    (elements × item size); per ordered pair of ranks: the k-th send from a to
    b and the k-th receive at b from a carry the same tag and the same bytes.
    """
    itemsize = 4
    costs = calibrate.MEASURED
    for count in (0, 1, 7 * N + 3, 40_000):      # 40,000 floats: pipelines of 3 segments
        for root in sorted({0, N - 1}):
            per_rank = []
            for r in range(N):
                plan = plan_of(primitive, algorithm, N, r, count, itemsize=itemsize, root=root,
                               counts=_counts(primitive, N, count))
                lines = traces.plan_lines(plan, itemsize, costs)
                sm, se, rm, re_ = plan.traffic()
                assert traces.traffic_of_lines(lines) == (sm, se * itemsize, rm, re_ * itemsize)
                per_rank.append(_parse(lines))
            for a in range(N):
                for b in range(N):
                    out = [(t, n) for dst, t, n in per_rank[a][0] if dst == b]
                    got = [(t, n) for src, t, n in per_rank[b][1] if src == a]
                    assert out == got, (f"{primitive}/{algorithm} N={N} count={count} "
                                        f"root={root}: {a}->{b} sends {out}, receives {got}")


def test_local_work_becomes_sleeps_of_the_calibrated_durations():
    """A ring allreduce's reductions and rounds become sleeps of exactly the costs given."""
    costs = calibrate.LocalCosts(reduce_call_s=1e-6, reduce_Bps=1e9, round_s=2e-6)
    N, count = 4, 4000
    plan = plan_of("allreduce", "ring", N, 1, count, itemsize=4)
    lines = traces.plan_lines(plan, 4, costs)
    slept = sum(float(x.split()[2]) for x in lines if x.split()[1] == "sleep")
    from mpicoll.sched.plan import REDUCE
    reduced = [op[1].size * 4 for op in plan.ops if op[0] == REDUCE]
    want = sum(1e-6 + b / 1e9 for b in reduced) + plan.rounds() * 2e-6
    assert reduced and slept == pytest.approx(want, rel=1e-9)


def test_mpich_rules_follow_smpis_selector():
    """native[mpich]'s choices at the thresholds SMPI's MPICH selector writes."""
    c = native.mpich_choice
    assert c("allreduce", 16, 2048, 4) == "rdb" and c("allreduce", 16, 4096, 4) == "rab_rdb"
    assert c("bcast", 8, 1 << 20, 4) == "binomial_tree"
    assert c("bcast", 16, 12288, 4) == "scatter_rdb_allgather"
    assert c("bcast", 15, 12288, 4) == "scatter_LR_allgather"
    assert c("allgather", 16, 1024, 4) == "rdb" and c("allgather", 15, 1024, 4) == "bruck"
    assert c("allgather", 16, 1 << 20, 4) == "ring"
    assert c("reduce_scatter", 16, 524289, 4) == "mpich_pair"


def test_platform_presets_and_bad_input():
    """Presets give the α, β they describe; bad parameters name the argument and the value."""
    p = platforms.preset("crossbar:bw=8Gbps,lat=2us", 4)
    assert p.alpha == pytest.approx(4e-6) and p.beta == pytest.approx(1e-9)
    ft = platforms.preset("fattree:leaf=4", 10)
    assert ft.params["topo_parameters"] == "2;4,3;1,4;1,1" and len(ft.hosts) == 10
    nodes = platforms.preset("nodes:K=3", 7)
    assert nodes.hosts == ["h0", "h0", "h0", "h1", "h1", "h1", "h2"]
    for bad, word in (("torus", "torus"), ("crossbar:bw=fast", "fast"),
                      ("crossbar:lat", "key=value"), ("nodes:K=0", "K")):
        with pytest.raises(ValueError, match=word):
            platforms.preset(bad, 4)


def test_missing_simgrid_is_a_clear_error(monkeypatch, tmp_path):
    """Without smpirun, ``bench simulate`` stops at once and names the install command."""
    from mpicoll.bench.cli import main
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit, match="apt-get install -y libsimgrid-dev"):
        main(["simulate", "--ranks", "4", "--sizes", "8"])


# -- replays --------------------------------------------------------------------------

GAMMA = 1 / 3e9
CHECK_SIZES = (64, 1 << 20)


def _closed_form_cases():
    out = []
    for p, a in HAND:
        for N in (4, 8):
            for nb in CHECK_SIZES:
                out.append((p, a, N, nb))
    return out


@needs_simgrid
@pytest.mark.parametrize("primitive,algorithm,N,nbytes", _closed_form_cases())
def test_simulation_agrees_with_the_exact_declared_cost(primitive, algorithm, N, nbytes):
    """On a contention-free crossbar SMPI's time is the declared closed form within 5 %.

    Where the declared cost is exact and no rank has two sends (or two
    receives) in flight at once: there SMPI shares the rank's link among them
    while the closed form sends one after another (those are skipped with
    their figures in benchmarks/simulate.md). The check platform: α = 1 µs,
    10 Gbit/s, a send completes when it is received (no eager sends), the
    reductions at γ = 1/3 ns per byte, nothing else local.
    """
    cost = cost_of(primitive, algorithm)
    plat = platforms.preset("crossbar:bw=10Gbps,lat=0.5us", N)
    plat.cfg += ("--cfg=smpi/send-is-detached-thresh:0",)
    layout = job.layout_of_hosts(plat.hosts)
    count, _, _ = job.plan_count(primitive, N, nbytes, 4)
    k = Call(N, count, 0, 4, _counts(primitive, N, count, matrix=True), True, layout)
    why = cost.why_inexact(k) if cost is not None else "no declared cost"
    if why:
        pytest.skip(f"declared cost not exact here: {why}")
    flights = [traces.in_flight(plan_of(primitive, algorithm, N, r, count, itemsize=4,
                                        counts=_counts(primitive, N, count), layout=layout))
               for r in range(N)]
    most = max(max(f) for f in flights)
    if most > 1:
        pytest.skip(f"messages to or from {most} peers in flight on one rank at once "
                    "(SMPI shares the link)")
    costs = calibrate.LocalCosts(reduce_Bps=1 / GAMMA, source="gamma only")
    out = job.simulate(job.Job(primitive, algorithm, N, nbytes, 4, plat, costs))
    want = cost.time(k, plat.alpha, plat.beta, GAMMA)
    assert out["seconds"] == pytest.approx(want, rel=0.05), (out, want)


@needs_simgrid
def test_bench_simulate_writes_the_measured_sweeps_records(tmp_path):
    """A small sweep: JSON lines that ``report`` reads, every row simulated with its platform."""
    from mpicoll.bench.cli import main
    from mpicoll.bench.report import index
    from mpicoll.bench.results import load
    out = tmp_path / "sim.jsonl"
    rc = main(["simulate", "--primitive", "allreduce,bcast", "--algorithm",
               "ring,binomial,native[mpich]", "--ranks", "4,6", "--sizes", "64,64K",
               "--platform", "nodes:K=2,bw=10Gbps,lat=5us", "-j", "2", "-J", str(out)])
    assert rc == 0
    provs, results, _ = load([str(out)])
    assert provs[0]["simulated"] and len(results) == 2 * 2 * 2 * 2
    for r in results:
        assert r["simulated"] and r["platform"]["name"] == "nodes" and r["time_us"]["avg"] > 0
    cells = index(results)
    assert set(cells) == {(p, n, "float32", op) for p, op in (("allreduce", "sum"),
                                                              ("bcast", None)) for n in (4, 6)}
    skips = [json.loads(x) for x in open(out) if '"skip"' in x]
    assert all(not s["failed"] for s in skips)
    assert os.path.getsize(out) > 0
