"""Simulated time vs the declared closed form on the contention-free crossbar (the test's cases).

    python benchmarks/simulate/closed_form.py > benchmarks/simulate/closed_form.txt

The platform and cases of
tests/test_simulate.py::test_simulation_agrees_with_the_exact_declared_cost, every case
printed: the ones the test asserts (messages to or from one peer at a time) and the ones it
skips (several peers in flight: SMPI shares the link), with the error of each.
"""
import statistics

from mpicoll import PRIMITIVES, algorithms
from mpicoll.bench.plan_prices import plannable
from mpicoll.coll.cost import Call
from mpicoll.core.blocks import split
from mpicoll.sched.inspect import plan_of
from mpicoll.simulate import calibrate, job, platforms, traces
from mpicoll.verify.declared import cost_of

GAMMA = 1 / 3e9


def counts(p, N, count, matrix=False):
    """A call's counts as plan_of takes them (``matrix``: as a Call's alltoallv does)."""
    if p == "reduce_scatter":
        return split(count, N)
    if p in ("gatherv", "scatterv", "allgatherv"):
        return [count] * N
    if p == "alltoallv":
        return [[count] * N for _ in range(N)] if matrix else [count] * N
    return None


def main():
    """Simulate every case, print each with its error, then the medians and the worst."""
    costs = calibrate.LocalCosts(reduce_Bps=1 / GAMMA, source="gamma only")
    errs = {"one in flight": [], "several in flight": []}
    print(f"{'primitive':15} {'algorithm':20} {'N':>2} {'bytes':>8} {'sim us':>10} "
          f"{'formula us':>10} {'error':>8}  in flight")
    for N in (4, 8):
        plat = platforms.preset("crossbar:bw=10Gbps,lat=0.5us", N)
        plat.cfg += ("--cfg=smpi/send-is-detached-thresh:0",)
        layout = job.layout_of_hosts(plat.hosts)
        for p in PRIMITIVES:
            for a in algorithms(p):
                if a == "native" or not plannable(p, a):
                    continue
                cost = cost_of(p, a)
                for nb in (64, 1 << 20):
                    count, _, _ = job.plan_count(p, N, nb, 4)
                    k = Call(N, count, 0, 4, counts(p, N, count, True), True, layout)
                    if cost is None or cost.why_inexact(k):
                        continue
                    most = max(max(traces.in_flight(plan_of(
                        p, a, N, r, count, itemsize=4, counts=counts(p, N, count),
                        layout=layout))) for r in range(N))
                    out = job.simulate(job.Job(p, a, N, nb, 4, plat, costs))
                    want = cost.time(k, plat.alpha, plat.beta, GAMMA)
                    e = out["seconds"] / want - 1
                    errs["one in flight" if most <= 1 else "several in flight"].append(
                        (abs(e), p, a, N, nb))
                    print(f"{p:15} {a:20} {N:2} {nb:8} {out['seconds'] * 1e6:10.2f} "
                          f"{want * 1e6:10.2f} {e * 100:+7.2f}%  {most}")
    for kind, v in errs.items():
        if v:
            worst = max(v)
            print(f"# {kind}: {len(v)} cases, median |error| "
                  f"{statistics.median(x[0] for x in v) * 100:.2f} %, worst "
                  f"{worst[0] * 100:.1f} % ({worst[1]} {worst[2]} N={worst[3]} {worst[4]} B)")


if __name__ == "__main__":
    main()
