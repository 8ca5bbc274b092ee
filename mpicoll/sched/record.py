"""Recording a plan: run an algorithm on a :class:`~.plan.Builder` with symbolic buffers.

Plans are cached per private communicator (:class:`PlanCache`) by the
algorithm and the call's signature — item size, each array's length (or
None), root, counts, and whether the op is a user op and commutative: the
only things an algorithm's control flow may depend on.

An algorithm that cannot be recorded (it touches data directly: a user's
quick experiment registered without ``ctx.copy``/``ctx.reduce``) is marked
*direct*: the engines then run it as a plain function on the real arrays.
"""
from collections import OrderedDict

import numpy as np
from mpi4py import MPI

from ..core.ops import OPS
from .plan import Builder, NotSchedulable, Sym

__all__ = ["PlanCache", "signature", "record", "is_array"]

_MAX_PLANS = 64


def is_array(a):
    """True for an array argument (not None, an int, an op, a list or a tuple)."""
    return not (a is None or isinstance(a, (int, np.integer, MPI.Op, list, tuple)))


def signature(args, op):
    """What a plan may depend on, as a hashable key (arrays by length)."""
    key = []
    for a in args:
        if a is None:
            key.append(None)
        elif isinstance(a, MPI.Op):
            key.append(("op", OPS.get(a.handle) is None, a.is_commutative))
        elif isinstance(a, (list, tuple)):
            key.append(tuple(a))
        elif isinstance(a, (int, np.integer)):
            key.append(int(a))
        else:
            key.append(-1 - a.size)      # arrays: by length (negative: never a root)
    if op is not None and not any(isinstance(a, MPI.Op) for a in args):
        key.append(("op", OPS.get(op.handle) is None, op.is_commutative))
    return tuple(key)


def record(fn, rank, size, args, itemsize, op, layout=None):
    """Run ``fn`` on a :class:`Builder` with symbolic buffers; its :class:`Plan`.

    ``layout``: the ranks' nodes (:class:`mpicoll.core.topology.Layout`) for node-aware
    algorithms; None records as if every rank were on one node.
    """
    n = 0
    sym_args = []
    for a in args:
        if is_array(a):
            sym_args.append(Sym(n, 0, a.size, itemsize))
            n += 1
        else:
            sym_args.append(a)
    user_op = op is not None and OPS.get(op.handle) is None
    b = Builder(rank, size, n, itemsize, user_op, layout)
    fn(b, *sym_args)
    return b.plan()


class _Entry:
    __slots__ = ("plan", "scratch")

    def __init__(self, plan):
        self.plan = plan
        self.scratch = {}


class PlanCache:
    """Plans of one private communicator, least recently used dropped past 64."""

    def __init__(self, layout=None):
        self.layout = layout          # the communicator's nodes, for node-aware plans
        self.entries = OrderedDict()
        self.direct = set()           # algorithms that cannot be recorded

    def get(self, fn, rank, size, args, itemsize, op):
        """The cache entry of this call (plan + scratch), or None to run ``fn`` directly."""
        if fn in self.direct:
            return None
        key = (fn, itemsize, signature(args, op))
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
            return entry
        try:
            plan = record(fn, rank, size, args, itemsize, op, self.layout)
        except NotSchedulable:
            self.direct.add(fn)
            return None
        entry = self.entries[key] = _Entry(plan)
        if len(self.entries) > _MAX_PLANS:
            self.entries.popitem(last=False)
        return entry

    def clear(self):
        """Forget every cached plan."""
        self.entries.clear()
