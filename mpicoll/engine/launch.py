"""Launching a validated call: blocking, as a request, or on host mirrors of device arrays.

:func:`run_call` is where every primitive's implementation hands over once
its arguments are checked and agreed: it picks the transport of the arrays'
memory, finds the plan (:class:`~mpicoll.sched.record.PlanCache`), and runs
it blocking (:mod:`.run`), as a nonblocking or persistent request
(:mod:`.nonblocking`) or on host copies (:mod:`.host_copy`), handing the
bound steps to the memo (:mod:`.memo`) where it may replay them.
"""
from mpi4py import MPI

from ..device.arrays import adapter_of, on_device
from . import host_copy, memo
from . import nonblocking as _nb
from .context import Ctx
from .run import compile_call, execute

__all__ = ["run_call"]


def run_call(call, count, itemsize, fn, *args, prologue=None, local=False):
    """Run ``fn`` on this call's buffers (blocking, or as the call's request).

    ``count``: elements moved, the same on every rank -- or, ``local``, this rank's
    own (alltoallv's): zero then means nothing to move *here*, which the
    hand-written algorithms skip (they leave empty blocks out on both sides), but
    MPI's own collective must still be called on every rank.
    ``prologue``: (dst, src) copied before the algorithm runs (an in-place call's
    snapshot of its input; a persistent request refreshes it at every ``Start``).
    """
    # Device buffers (all of one call share one memory) choose the transport.
    adapter = device = None
    like = op = None
    for a in args:
        if isinstance(a, MPI.Op):
            op = a
        elif like is None and a is not None and not isinstance(a, (int, list, tuple)):
            like = a
            adapter = adapter_of(a)
            if adapter is not None:
                device = adapter.device_id(a)
    if call.host_copy:                 # small and on a device: host mirrors (see host_copy)
        return host_copy.run(call, count, itemsize, fn, args, prologue, adapter, device)
    ctx = call.ctx(count, itemsize, adapter, device)  # recorded for traffic() even when empty
    if not count and fn.primitive != "barrier" and not (local and fn.algorithm == "native"):
        if call.kind is not None:
            _nb.empty_request(call, None)
        return
    ctx.op, ctx.like = op, like
    with on_device(adapter, device):   # kernels, streams and copies on the data's GPU
        entry = None
        if fn.algorithm != "native":
            entry = call.state.plans.get(fn, call.rank, call.size, args, itemsize, op)
        fast = ctx.mpi is ctx.comm and ctx._rec is None and type(ctx) is Ctx
        if call.kind is None:
            if fast and entry is not None and memo.wanted(call, ctx, count * itemsize):
                # A call the memo may replay: compiled once into a program of persistent
                # requests (mpicoll.engine.program), run now and at every replay.
                program = compile_call(ctx, entry, args, op)
                program.run()
                call.memo[:] = (program, prologue, None)
                return
            steps = execute(ctx, fn, entry, args, op, fast)
            if memo.wanted(call, ctx, count * itemsize):
                # The memo replays them (see memo); device steps on their transport.
                dev = None if fast else memo.device_binding(ctx.mpi, adapter, device)
                call.memo[:] = (steps, prologue, dev)
            return

        def run_now():
            with on_device(adapter, device):
                if prologue is not None:
                    prologue[0][...] = prologue[1]
                execute(ctx, fn, entry, args, op, fast)
        captured = None
        if call.kind == "start" and entry is not None and memo.wanted(call, ctx,
                                                                     count * itemsize):
            captured = []                  # the bound program, for the memo to replay
        _nb.start(call, ctx, fn, args, op, entry, fast, run_now, prologue, captured)
        if captured:
            call.memo[:] = (captured[0], prologue,
                            None if fast else memo.device_binding(ctx.mpi, adapter, device))
