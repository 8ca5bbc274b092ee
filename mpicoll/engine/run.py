"""The blocking executor: bind a call's plan to its buffers and run it.

Plans come from the per-communicator :class:`~mpicoll.sched.record.PlanCache`.
Scratch vectors are cached with the plan, per dtype and memory, and reused by
every blocking call with that signature (nonblocking and persistent requests
get their own, since several may be in flight).

Binding turns a plan into a list of ready-to-call steps on array views.
Host buffers with no traffic recorder or tracer take the *fast* binding:
the private communicator's own ``Send``/``Recv``/... and the op's ufunc,
bound once with :func:`functools.partial`. Everything else (device
transports, ``mpicoll.traffic()``, the bench tracer) binds to the call's
:class:`~mpicoll.engine.context.Ctx`, which counts, traces and stages.

An algorithm that cannot be recorded (it touches data directly: a user's
quick experiment registered without ``ctx.copy``/``ctx.reduce``) runs as a
plain function on the real arrays, exactly as before plans existed.
"""
from functools import partial

import numpy as np
from mpi4py import MPI

from ..args.buffers import wire
from ..core.ops import OPS
from ..device.arrays import adapter_of, data_ptr, empty
from ..device.reduce import combine
from ..sched.plan import COPY, IRECV, ISEND, RECV, REDUCE, SEND, SENDRECV, WAIT
from ..sched.record import is_array
from . import fuse as _fuse
from .program import compile_plan, quiet, slicer

__all__ = ["execute", "compile_call", "bind", "scratch_for", "assign"]


def scratch_for(plan, like, cache=None):
    """Scratch vectors of ``plan`` in ``like``'s dtype and memory (reused through ``cache``)."""
    if not plan.scratch_sizes:
        return []
    if like is None:                  # barrier: zero-byte tokens
        return [np.empty(n, np.uint8) for n in plan.scratch_sizes]
    if cache is not None:
        ad = adapter_of(like)
        key = (like.dtype, None if ad is None else (id(ad), ad.device_id(like)))
        got = cache.get(key)
        if got is None:
            got = cache[key] = [empty(like, n) for n in plan.scratch_sizes]
        return got
    return [empty(like, n) for n in plan.scratch_sizes]


def assign(dst, src):
    """Copy ``src`` into ``dst`` (a step)."""
    dst[...] = src


def _same_memory(a, b):
    return a.size == b.size and data_ptr(a) == data_ptr(b)


def bind(plan, arrays, op, ctx, fast, nonblocking=False, persistent=False, retag=None):
    """``plan``'s steps bound to ``arrays`` (call arrays, then scratch): (steps, requests).

    ``fast``: host arrays, no counting or tracing — bind MPI and NumPy directly.
    ``nonblocking``: every message is posted (Isend/Irecv) and each wait is a
    tuple of request slots in the step list, for :mod:`.nonblocking` to test;
    a blocking send, receive or sendrecv becomes posts plus such a wait.
    ``persistent`` (with ``fast``): messages become MPI persistent requests
    (``Send_init``/``Recv_init``) made here once; a post step is their ``Start``.
    ``retag`` (with ``fast`` and ``nonblocking``): a one-element list holding the
    tag, read when each message is posted -- steps that the memo replays as a
    new request, with the new call's tag (:mod:`mpicoll.engine.memo`). Steps bound to
    a :class:`~mpicoll.engine.context.Ctx` read ``ctx.tag`` when they post anyway.
    """
    view = slicer(arrays)
    msg = view
    if fast and any(a.dtype.kind == "V" for a in arrays):
        def msg(sym):             # packed entries (mpicoll.args.user_ops) travel as bytes
            return wire(view(sym))
    reqs = [None] * plan.nreq
    steps = []
    add = steps.append
    tag = ctx.tag
    if fast:
        comm = ctx.comm
        send, recv, sendrecv = comm.Send, comm.Recv, comm.Sendrecv
        isend, irecv = comm.Isend, comm.Irecv
        entry = OPS.get(op.handle) if op is not None else None
        ufunc = entry[1] if entry is not None else None
    else:
        isend, irecv = ctx.isend, ctx.irecv

    def post(kind, buf, peer, slot=None):
        if slot is None:
            slot = len(reqs)
            reqs.append(None)
        if persistent:
            init = comm.Send_init if kind is isend else comm.Recv_init
            reqs[slot] = init(msg(buf), peer, tag)
            add(reqs[slot].Start)
            return slot
        if not fast:
            start = partial(kind, view(buf), peer)
        elif retag is None:
            start = partial(kind, msg(buf), peer, tag)
        else:
            start = partial(_retagged, kind, msg(buf), peer, retag)
        return posted(start, slot)

    def posted(start, slot=None):
        if slot is None:
            slot = len(reqs)
            reqs.append(None)
        add(partial(_post, reqs, slot, start))
        return slot

    fused = {}
    if not fast and op is not None and getattr(ctx.mpi, "fuses", False):
        fused = _fuse.fusions(plan, op, ctx, view)

    for i, o in enumerate(plan.ops):
        if i in fused:
            f = fused[i]
            if f is None:
                pass                   # the REDUCE (and copies) a fused receive took
            elif not nonblocking:
                add(f.step(ctx))
            else:
                # The reduction runs when the message arrives: copies first, so that
                # what it reads is final once the receive is posted.
                if f.copies:
                    add(partial(_fuse.copies, f.copies))
                r = posted(partial(_fuse.irecv_reduce, ctx, f.recv, f.source, f.reduce))
                if f.send is None:
                    add((r,))
                else:
                    add((posted(partial(ctx.isend, f.send, f.dest)), r))
            continue
        k = o[0]
        if nonblocking and k in (SEND, RECV, SENDRECV):
            if k == SEND:
                add((post(isend, o[1], o[2]),))
            elif k == RECV:
                add((post(irecv, o[1], o[2]),))
            else:
                r = post(irecv, o[3], o[4])
                add((post(isend, o[1], o[2]), r))
        elif k == SEND:
            add(partial(send, msg(o[1]), o[2], tag) if fast
                else partial(ctx.send, view(o[1]), o[2]))
        elif k == RECV:
            add(partial(recv, msg(o[1]), o[2], tag) if fast
                else partial(ctx.recv, view(o[1]), o[2]))
        elif k == SENDRECV:
            if fast:
                add(partial(sendrecv, msg(o[1]), o[2], tag, msg(o[3]), o[4], tag))
            else:
                add(partial(ctx.sendrecv, view(o[1]), o[2], view(o[3]), o[4]))
        elif k == ISEND:
            post(isend, o[1], o[2], o[3])
        elif k == IRECV:
            post(irecv, o[1], o[2], o[3])
        elif k == WAIT:
            add(o[1] if nonblocking else partial(_wait_slots, reqs, o[1], None if fast else ctx))
        elif k == COPY:
            d, s = view(o[1]), view(o[2])
            if not _same_memory(d, s):
                add(partial(np.copyto, d, s) if fast else partial(assign, d, s))
        elif k == REDUCE:
            lo, hi, out = view(o[1]), view(o[2]), view(o[3])
            if fast and ufunc is not None:
                add(partial(quiet, ufunc, lo, hi, out))
            elif fast:
                add(partial(op.Reduce_local, lo, hi))
            else:
                add(partial(combine, op, lo, hi, out))
    return steps, reqs


def _post(reqs, slot, start):
    reqs[slot] = start()


def _retagged(post, buf, peer, tag):
    return post(buf, peer, tag[0])


def _wait_slots(reqs, slots, ctx):
    rs = [reqs[i] for i in slots]
    if ctx is None:
        MPI.Request.Waitall(rs)
    else:
        ctx.waitall(rs)


def compile_call(ctx, entry, args, op):
    """``entry``'s plan compiled for this call's host arrays: a :class:`~.program.Program`.

    The call's arrays, then the plan entry's scratch (shared by the blocking calls of
    that plan), on the private communicator with the call's tag.
    """
    arrays = [a for a in args if is_array(a)]
    arrays += scratch_for(entry.plan, ctx.like, entry.scratch)
    return compile_plan(entry.plan, arrays, op, ctx.comm, ctx.tag)


def execute(ctx, fn, entry, args, op, fast):
    """Run one blocking call of ``entry``'s plan on ``args``; return the steps that repeat it.

    Where ``entry`` is None (an algorithm that cannot be recorded), ``fn`` itself runs on
    them.

    (Reductions never raise floating-point traps: :func:`~.program.quiet` on the fast
    path, :func:`mpicoll.device.reduce.combine`'s errstate otherwise.)
    """
    if entry is None:
        fn(ctx, *args)
        return (partial(fn, ctx, *args),)
    plan = entry.plan
    arrays = [a for a in args if is_array(a)]
    arrays += scratch_for(plan, ctx.like, entry.scratch)
    steps, _ = bind(plan, arrays, op, ctx, fast)
    for step in steps:
        step()
    return steps
