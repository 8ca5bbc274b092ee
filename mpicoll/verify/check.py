"""Verify one case: record every rank's plan, execute them together, compare with the spec.

:func:`verify` returns a :class:`Result`: ``status`` is ``pass``, ``fail``
(with the :class:`~.executor.Failure`), ``skip`` (the call is refused by
the algorithm itself: a commutative-only algorithm with a non-commutative
op, a node-aware one on nodes it cannot keep rank order on) or
``unverified`` (the algorithm cannot be recorded as a plan).

Besides the result on every rank it checks the algorithm's declared cost
(:class:`mpicoll.coll.cost.Cost`) where the declaration says it is exact:
the busiest rank's counted traffic (messages, elements moved, elements
reduced, counted as :func:`.executor.load` counts them) and the run's
critical path (:func:`.executor.timing`) against the declared latency,
bandwidth and reduction terms.
"""
import traceback
from dataclasses import dataclass, field

import numpy as np

from ._mpicoll import Builder, NotSchedulable, Sym
from .executor import Executor, Failure, load, timing
from .spec import DATALESS, _Len, setup

__all__ = ["verify", "Result", "record", "plans_for", "measured"]


@dataclass
class Result:
    """The outcome of one case: its status, failure or reason, and what the run measured."""

    case: object
    status: str                   # pass | fail | skip | unverified
    failure: Failure = None
    reason: str = ""
    traffic: tuple = None         # busiest rank's (messages, elements, reduced)
    path: tuple = None            # critical path (steps, elements, reduced)
    cost: str = ""                # "checked" | "not exact: why" | "none"
    stats: dict = field(default_factory=dict)

    @property
    def ok(self):
        """True unless the case failed."""
        return self.status != "fail"


def record(fn, rank, size, args, itemsize, user_op, layout):
    """The plan of ``fn`` on ``rank`` for ``args`` (arrays given as lengths)."""
    n = 0
    sym = []
    for a in args:
        if isinstance(a, _Len):
            sym.append(Sym(n, 0, a.size, itemsize))
            n += 1
        else:
            sym.append(a)
    b = Builder(rank, size, n, itemsize, user_op, layout)
    fn(b, *sym)
    return b.plan()


def refusal(case, s):
    """Why the algorithm refuses this call (as the API would), or None."""
    fn = s.fn
    if case.op == "noncomm" and getattr(fn, "commutative_only", False):
        return "commutative ops only"
    check = getattr(fn, "check_layout", None)
    if check is not None and s.layout is not None:
        why = check(s.layout, case.op != "noncomm")
        if why:
            return why
    return None


def plans_for(s):
    """Every rank's plan for a :class:`~.spec.Setup` (None where the rank makes no call)."""
    case = s.case
    user_op = case.op in ("user", "noncomm") and s.op is not None
    plans = []
    for r, rs in enumerate(s.ranks):
        if not rs.calls:
            plans.append(None)
            continue
        plans.append(record(s.fn, r, case.N, rs.args, case.itemsize, user_op, s.layout))
    return plans


def measured(plans):
    """The busiest rank's (messages, elements moved, elements reduced): each a maximum."""
    loads = [load(p) for p in plans]
    return tuple(max((x[i] for x in loads), default=0) for i in range(3))


def verify(case, seed=0, costs=True):
    """Verify one :class:`~.spec.Case`; a :class:`Result`."""
    try:
        s = setup(case, seed)
    except Exception as exc:
        return Result(case, "fail", Failure("setup", f"{type(exc).__name__}: {exc}"))
    why = refusal(case, s)
    if why:
        return Result(case, "skip", reason=why)
    try:
        plans = plans_for(s)
    except NotSchedulable as exc:
        return Result(case, "unverified", reason=f"not recordable as a plan: {exc}")
    except Exception as exc:
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return Result(case, "fail", Failure(
            "error", f"recording raised {type(exc).__name__}: {exc} "
                     f"({tb.filename.rsplit('/', 1)[-1]}:{tb.lineno})"))
    user_op = case.op in ("user", "noncomm")
    ex = Executor(plans, s.ranks, s.mode, user_op, case.itemsize, case.eager,
                  know=case.primitive in DATALESS)
    try:
        ex.run()
        _check_results(ex, s)
        traffic = measured(plans)
        path = None
        status = "not checked"
        if costs:
            from .declared import declared
            decl = declared(case)
            if decl is None:
                status = "none"
            elif decl[1]:
                status = f"not exact: {decl[1]}"
            else:
                path = timing(ex)
                status = _check_cost(decl[0], traffic, path)
    except Failure as f:
        return Result(case, "fail", f)
    return Result(case, "pass", traffic=traffic, path=path, cost=status,
                  stats={"messages": ex.messages})


def _check_results(ex, s):
    d = s.mode.describe
    for r, rs in enumerate(s.ranks):
        if ex.plans[r] is None:
            for b, (init, want) in enumerate(zip(rs.init, rs.expect, strict=True)):
                if want is not None and not np.array_equal(init, want):
                    raise Failure("result", f"rank {r} makes no call but buf{b} should change")
            continue
        for b, want in enumerate(rs.expect):
            if want is None:
                continue
            got = ex.bufs[r][b]
            if not np.array_equal(got, want):
                i = int(np.argmax(got != want))
                role = "read-only input" if rs.roles[b] == "in" else "result"
                raise Failure("result", f"rank {r} buf{b}[{i}] ({role}) holds {d(got[i])}, "
                                        f"expected {d(want[i])}")


def _check_cost(want, traffic, path):
    """Compare with the declared cost ``want`` (load, then critical path); raises on a mismatch."""
    msgs, elems, reduced, steps, bpath, gpath = want
    got = {"messages": traffic[0], "elements": traffic[1], "reduced": traffic[2],
           "steps": path[0], "path elements": path[1], "path reduced": path[2]}
    exp = {"messages": msgs, "elements": elems, "reduced": reduced, "steps": steps,
           "path elements": bpath, "path reduced": gpath}
    bad = [f"{k} {got[k]} (declared {exp[k]:g})" for k in got
           if exp[k] is not None and got[k] != exp[k]]
    if bad:
        raise Failure("cost", "the plans differ from the declared cost (busiest rank: messages, "
                              "elements, reduced; critical path: steps, path elements, path "
                              "reduced): " + ", ".join(bad))
    return "checked"
