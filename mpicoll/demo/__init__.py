"""``mpirun -n 4 python -m mpicoll.demo``: the seed's primitives on hand-written algorithms.

Sections, in the seed's order: broadcast, reduce, all_reduce, gather,
all_gather, scatter, reduce_scatter (each: "Before"/"After" lines per rank in
rank order, checked against the MPI library's own collective on the same
data), the ring allreduce step by step, the barrier experiment, and a
traffic table (elements and messages per rank: measured by
:func:`mpicoll.traffic`, exact from each algorithm's recorded plan, and the
textbook formula where the algorithm has one). The table lists every
registered algorithm, plug-ins loaded with ``--import`` included. Any
disagreement ends the run with exit status 1; usage errors exit with 2. Run
``python -m mpicoll.demo --help`` for the flags.

``--device gpu`` runs the same walkthrough on CuPy arrays: every rank first
checks CuPy locally (no GPU on any rank: every rank ends at once with exit
status 3 and one line naming why), then :func:`mpicoll.gpu.select_device`
puts it on GPU ``local rank % GPUs`` (``MPICOLL_DEVICE`` overrides), and the
header shows each rank's GPU, the CuPy/CUDA versions and the device path
(CUDA-aware MPI or staged through pinned host memory).

Modules: :mod:`.cli` (flags, the run, exit status), :mod:`.walk` (the seed's
calls), :mod:`.sections` (walkthrough, ring, barrier sections), :mod:`.ring`
(the ring's step model and picture), :mod:`.table` (the traffic table),
:mod:`.textbook` (the check of the claims the algorithms declare),
:mod:`.device` (``--device gpu``), :mod:`.output` (rank-ordered printing,
formatting, agreed checks).
"""
from .cli import main

__all__ = ["main"]
