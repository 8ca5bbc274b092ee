"""One case in detail: what was checked, and the verified plan drawn step by step."""
from .check import plans_for, verify
from .declared import call_of, cost_of
from .executor import R_A, R_B, R_END, R_PEER, R_SEND, Executor, timing
from .spec import DATALESS, Case, setup

__all__ = ["show_case", "plan_lines"]


def plan_lines(case, seed=0, max_ranks=16):
    """The verified plan of ``case`` as lines of text, one row per step, one column per rank.

    The rows follow its critical-path schedule; ``>d`` sends to rank d, ``<s`` receives
    from rank s, ``n`` elements. Raises :class:`~.executor.Failure` when the case fails.
    """
    s = setup(case, seed)
    plans = plans_for(s)
    ex = Executor(plans, s.ranks, s.mode, case.op in ("user", "noncomm"), case.itemsize,
                  case.eager, know=case.primitive in DATALESS)
    ex.run()
    timing(ex)
    N = min(case.N, max_ranks)
    cells = {}
    steps = 0
    for r in range(N):
        for x in ex.events[r]:
            if x.__class__ is list:
                t = x[R_END][0]
                steps = max(steps, t)
                mark = ">" if x[R_SEND] else "<"
                cells.setdefault((t, r), []).append(f"{mark}{x[R_PEER]}:{x[R_B] - x[R_A]}")
    for v in cells.values():
        v.sort(key=lambda x: x[0] != ">")          # a step's sends first, then its receives
    width = max([7] + [len(" ".join(v)) for v in cells.values()])
    head = "step  " + "  ".join(f"rank {r}".ljust(width) for r in range(N))
    lines = [head, "-" * len(head)]
    for t in range(1, steps + 1):
        row = [" ".join(cells.get((t, r), [])).ljust(width) for r in range(N)]
        lines.append(f"{t:>4}  " + "  ".join(row))
    if case.N > N:
        lines.append(f"(ranks {N}..{case.N - 1} not shown)")
    return lines


def show_case(text, seed=0, draw=False, out=print):
    """Verify the case named by ``text`` (``Case.text()`` form) and print what it checked."""
    try:
        case = Case.parse(text)
    except ValueError as exc:
        out(str(exc))
        return 2
    r = verify(case, seed)
    out(f"case: {case.text()}")
    out(f"status: {r.status}" + (f" ({r.reason})" if r.reason else ""))
    if r.failure is not None:
        out(f"{r.failure.kind}: {r.failure.text}")
    if r.traffic is not None:
        out(f"busiest rank: {r.traffic[0]} messages, {r.traffic[1]} elements moved, "
            f"{r.traffic[2]} reduced")
    if r.path is not None:
        out(f"critical path: {r.path[0]} steps, {r.path[1]} elements, {r.path[2]} reduced")
    cost = cost_of(case.primitive, case.algorithm)
    if cost is not None and r.status != "skip":
        k = call_of(case)
        out(f"declared cost: {cost.text}; cost check: {r.cost or 'not reached'}")
        if not cost.why_inexact(k):
            a, b, g = cost.terms(k)
            out(f"  declared critical path: {a:g} steps, {b:g} elements, {g:g} reduced")
            if not cost.why_load_inexact(k):
                m, e, d = cost.load(k)
                out(f"  declared busiest rank: {m:g} messages, {e:g} elements, {d:g} reduced")
    elif cost is None:
        out("declared cost: none")
    if draw and r.status == "pass":
        for line in plan_lines(case, seed):
            out(line)
    return 0 if r.ok else 1
