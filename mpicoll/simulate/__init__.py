"""Simulate collectives at cluster scale: verified plans replayed by SimGrid/SMPI.

Every hand-written algorithm's plan (:mod:`mpicoll.sched.plan`) is written as
SMPI *time-independent* traces (:mod:`.traces`): one file per rank, its
messages with their sizes in bytes, its waits, and its local work (copies,
reductions, the executor's per-round step) as timed actions whose durations
are measured on this machine (:mod:`.calibrate`). The MPI library's own
collectives are written as SMPI's collective actions (:mod:`.native`), which
SMPI runs with its implementations of MPICH's and Open MPI's algorithms.
:mod:`.platforms` describes the cluster (presets or an SMPI XML file) and
:mod:`.replay` runs ``smpirun``: one simulated time per call.

Nothing here needs MPI or imports mpi4py beyond what recording plans needs;
SimGrid is needed only to replay (:func:`.replay.require`).
"""
