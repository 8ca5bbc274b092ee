"""Schedules: every hand-written algorithm as a plan, and the engines that run plans.

An algorithm is one function ``fn(ctx, *buffers_and_args)`` that talks only
through ``ctx`` (send, recv, sendrecv, isend, irecv, waitall, copy, reduce,
scratch). Called with a :class:`~mpicoll.sched.plan.Builder` and symbolic
buffers it *records* its schedule — a :class:`~mpicoll.sched.plan.Plan`,
the list of point-to-point operations, local copies and reductions on buffer
slices, with the waits between them — instead of moving data (the model of
MPICH's transport-based collectives and libNBC). Engines then run a plan:

- :mod:`.run` — the blocking executor (plans and bound buffers cached);
- :mod:`.nonblocking` — requests that post a plan's messages and advance on
  ``Test``/``Wait`` (libNBC's rounds), and persistent requests (built once,
  ``Start``/``Wait`` many times).

Everything that needs an algorithm's messages (traffic counters, the demo's
tables, the cost model's message counts) can read them from its plan.
"""
