"""Schedules: every hand-written algorithm as a plan (the IR), recorded once per call signature.

An algorithm is one function ``fn(ctx, *buffers_and_args)`` that talks only
through ``ctx`` (send, recv, sendrecv, isend, irecv, waitall, copy, reduce,
scratch). Called with a :class:`~mpicoll.sched.plan.Builder` and symbolic
buffers it *records* its schedule — a :class:`~mpicoll.sched.plan.Plan`,
the list of point-to-point operations, local copies and reductions on buffer
slices, with the waits between them — instead of moving data (the model of
MPICH's transport-based collectives and libNBC).

What lives here: :mod:`.plan` (the IR and the builder), :mod:`.record`
(recording, and the per-communicator plan cache) and :mod:`.inspect`
(any rank's plan of any algorithm without a communicator: the demo, the
bench's model, the verifier and the docs' gallery read these). The engines
that run plans are :mod:`mpicoll.engine.run` (blocking) and
:mod:`mpicoll.engine.nonblocking` (nonblocking and persistent requests).

May import: ``core``.
"""
