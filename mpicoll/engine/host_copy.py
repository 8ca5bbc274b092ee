"""Small calls on device arrays, run on page-locked host copies.

A call whose messages are a few bytes costs, on the device path, a copy to
the host (or an IPC round trip), a message and a kernel *per message* --
each far dearer than its bytes. Below :func:`mpicoll.device.arrays.host_copy_max`
bytes per rank (``MPICOLL_GPU_HOST_COPY``, default 4 KiB) a blocking call
instead copies its device inputs once to page-locked host mirrors, runs the
same hand-written algorithm there (plain MPI messages and NumPy reductions,
the host fast path) and copies its results back once: two copies in all.
Open MPI's ``coll/cuda`` stages reductions the same way. A nonblocking call
does the same with mirrors of its own: it copies its inputs down when it is
made, runs the algorithm as a request on the host, and copies the results
back as the request's last step; a persistent request copies down at every
``Start`` and back as each run's last step. The traffic record
says ``host-copy``; the messages are those of the algorithm on the host, so
ranks on this path meet ranks on the staged or CUDA-aware one in a call (not
ranks on the ipc one: the agreement step refuses that split).

Inputs and outputs follow the algorithms' argument convention: the first
argument is the send data (read only) unless it is None (in place: the
output carries the input; off a scatter's root: nothing to send) or the
call is a ``bcast`` (one buffer: copied down on the root, back elsewhere).
Outputs that a call may leave partly unwritten (:data:`PARTIAL`: exscan's
rank 0, the gaps between v-collective blocks) are copied down first too, so
that copying them back leaves those elements as they were. ``alltoallv``
(no single per-rank size) never takes this path.
"""
from functools import partial

from mpi4py import MPI

from ..device.arrays import ALIGN, PinnedArena, arena_for, on_device
from . import nonblocking as _nb
from .context import Ctx
from .memo import device_binding, wanted
from .run import assign, execute

__all__ = ["run", "PATH"]

PATH = "host-copy"

#: Primitives whose outputs may be left partly unwritten.
PARTIAL = frozenset({"exscan", "gatherv", "allgatherv", "alltoallv"})
#: Primitives whose send data is None off the root (not in place: the output is new).
_ROOTED_SEND = frozenset({"scatter", "scatterv"})


def run(call, count, itemsize, fn, args, prologue, adapter, device):
    """Run ``fn`` (any kind of call, its agreement posted) on host mirrors of its device arrays.

    Calls within the memo's size limit hand their bound steps (copies included)
    to :mod:`mpicoll.engine.memo` through ``call.memo``.
    """
    request = call.kind is not None
    if request:
        # Mirrors of its own (they live until it completes), sized for them.
        room = sum(a.nbytes + ALIGN for a in args if _mirrored(a, adapter))
        arena = PinnedArena(adapter, room)
    else:
        arena = arena_for(adapter, device)
        arena.live = 0                 # a blocking call: nothing of this thread in flight
    host = list(args)
    d2h, h2d = [], []
    # What is copied down (read by the algorithm) and back (written by it).
    down_all = (args[0] is None and fn.primitive not in _ROOTED_SEND) or \
        call.primitive in PARTIAL
    bcast_from = args[1] if fn.primitive == "bcast" else None
    ctx = call.ctx(count, itemsize)           # host memory: the communicator itself
    ctx.path = PATH
    if ctx._rec is not None:
        ctx._rec.path = PATH
    op = next((a for a in args if isinstance(a, MPI.Op)), None)
    ctx.op = op
    fast = ctx._rec is None and type(ctx) is Ctx
    try:
        with on_device(adapter, device):      # pinned memory taken with the data's GPU current
            for i, a in enumerate(args):
                if not _mirrored(a, adapter):
                    continue
                h = arena.take(a.dtype, a.size).reshape(a.shape)
                host[i] = h
                if (i == 0 and bcast_from in (None, call.rank)) or down_all:
                    d2h.append(partial(adapter.to_host, a, h))
                if i > 0 or (bcast_from is not None and bcast_from != call.rank):
                    h2d.append(partial(adapter.to_device, h, a))
            ctx.like = next(h for h, a in zip(host, args, strict=True) if h is not a)
            # None: a plug-in that touches data directly (run as it is, see execute)
            entry = call.state.plans.get(fn, call.rank, call.size, host, itemsize, op)
            if request:
                return _start(call, ctx, fn, entry, host, op, fast, d2h, h2d, prologue,
                              adapter, device, count, itemsize)
            if prologue is not None:
                prologue[0][...] = prologue[1]     # the in-place snapshot, on the device
            bound = _copied_around(ctx, fn, entry, host, op, fast, d2h, h2d)
    finally:
        if not request:
            arena.live = 0             # every slot of this call is free again
    if wanted(call, ctx, count * itemsize):
        # Replayed by the memo on the same mirrors (its entry keeps them).
        call.memo[:] = ((*d2h, *bound, *h2d), prologue, device_binding(None, adapter, device))


def _copied_around(ctx, fn, entry, host, op, fast, d2h, h2d):
    """Copies down, the call on the mirrors, copies back (blocking); the bound steps."""
    for step in d2h:
        step()
    bound = execute(ctx, fn, entry, host, op, fast)
    for step in h2d:
        step()
    return bound


def _start(call, ctx, fn, entry, host, op, fast, d2h, h2d, prologue, adapter, device,
           count, itemsize):
    """The request of a nonblocking or persistent call on host mirrors.

    Copies down when it starts (in the caller's thread, ordered after its stream's work),
    the algorithm as a request on the host, copies back as its last steps (with the data's
    device current).
    """
    scope = partial(on_device, adapter, device)
    if call.kind == "init" and prologue is not None:
        # The in-place snapshot is taken again at every Start, before it is copied down.
        d2h = [partial(assign, *prologue), *d2h]

    def run_now():                     # an algorithm that cannot run as a plan: blocking
        with scope():
            _copied_around(ctx, fn, entry, host, op, fast, d2h, h2d)
    memo = None
    if call.kind == "start" and entry is not None and wanted(call, ctx, count * itemsize):
        memo = []
    _nb.start(call, ctx, fn, host, op, entry, fast, run_now, memo=memo,
              copies=(tuple(d2h), tuple(h2d), scope))
    if memo:
        # The in-place snapshot (a device copy) is taken again at every replay, before
        # the copies down (mpicoll.engine.memo).
        call.memo[:] = (memo[0], prologue, device_binding(None, adapter, device))


def _mirrored(a, adapter):
    """True for an argument that gets a host mirror: an array in ``adapter``'s memory."""
    return not (a is None or isinstance(a, (int, list, tuple, MPI.Op))) and adapter.matches(a)

