"""How a call runs: validation state, agreement, the repeated-call memo, the executors.

What lives here: :mod:`.call` (one collective call: check, agree, choose the
algorithm), :mod:`.fingerprint` (what the ranks compare when they agree),
:mod:`.context` (the point-to-point layer the algorithms talk through: the
private communicator, traffic counters, tracing), :mod:`.memo` (repeated
calls replay their bound plan), :mod:`.run` (the blocking executor: bind a
plan to buffers, run it), :mod:`.nonblocking` and :mod:`.progress`
(requests, persistent requests, the progress thread), :mod:`.fuse`
(receive and reduce fused over CUDA IPC) and :mod:`.host_copy` (small
device calls run on host mirrors).

May import: ``sched``, ``coll``, ``args``, ``device``, ``core``.
"""
