"""A repeated blocking ``all_reduce`` of one tensor: one look-up, the program, one work.

``dist.all_reduce(t)`` on the same tensor, op and group, again and again, is the
torch user's small call (a loss, a metric, a flag). The first call takes the
backend's full path, which leaves a *fast* memo entry behind
(:mod:`mpicoll.engine.memo`: the compiled program of the in-place call on the
tensor's NumPy view); the group remembers the tensor, its data pointer and size,
the op, that entry and the completed work it returned. A repeated call is one
dictionary look-up by the tensor's identity, the checks of what can change
under the same tensor (its storage: data pointer and number of elements; the
op), the entry's own hit test (agreement, then the program) and the same
completed work object: nothing else per call.

Only blocking, host, ops MPI reduces as they are (no AVG or PREMUL_SUM, which
need steps of their own), and groups with torch's default timeout (a group with
a timeout runs every call as a request waited on with a deadline).
"""
from mpi4py import MPI

from ..core import watchdog as _wd
from ..engine.faces import active as _active
from ..engine.faces import memo_get
from ..engine.faces import recorders as _recorders
from ..engine.memo import BY_VALUE, MISS

__all__ = ["Repeated"]

_MAX = 64                      # tensors remembered per group (then it starts again)


class Repeated:
    """A process group's remembered blocking ``all_reduce`` calls, by tensor."""

    __slots__ = ("group", "calls")

    def __init__(self, group):
        self.group = group
        self.calls = {}

    def hit(self, tensors, opts):
        """The completed work of a repeated call, run again; None: the full path."""
        if opts is None or opts.asyncOp or _active or _recorders or _wd.ON:
            return None
        if type(tensors) is not list or len(tensors) != 1:
            return None
        t = tensors[0]
        c = self.calls.get(id(t))
        if c is None or self.group._broken is not None:
            return None
        _, ptr, n, op, entry, work = c
        if t.data_ptr() != ptr or t.numel() != n or opts.reduceOp != op \
                or memo_get(entry.key) is not entry:
            return None
        return None if entry.hit() is MISS else work

    def remember(self, t, op, comm, algorithm, view, mpi_op, work):
        """Remember a blocking call that just ran on ``t`` (if its memo entry is fast)."""
        key = ("allreduce", id(comm), algorithm, id(MPI.IN_PLACE), id(view),
               mpi_op if mpi_op.__class__ in BY_VALUE else id(mpi_op))
        entry = memo_get(key)
        if entry is None or not entry.fast or t.device.type != "cpu":
            return
        if len(self.calls) >= _MAX:
            self.calls.clear()
        # (the tensor is held: no other object takes its identity while it is remembered)
        self.calls[id(t)] = (t, t.data_ptr(), t.numel(), op, entry, work)
