"""The algorithms, one module per primitive; importing this fills the registry.

Each algorithm is a function ``fn(ctx, *buffers_and_args)`` registered with
:func:`mpicoll.register`; its docstring states its α-β-γ cost and its limits.
Point-to-point algorithms talk only through ``ctx`` and are recorded as plans
(:mod:`mpicoll.sched`); :mod:`.shm` reads peers' memory on a node instead;
:mod:`.hierarchical` composes flat algorithms across nodes. Each registration
declares its cost (:mod:`.cost`; its split between nodes with :mod:`.links`) and
its textbook claim (:mod:`.textbook`); ``_common`` and ``_vcommon`` hold the
tree walks several algorithms share.

May import: ``device``, ``core``.
"""
# Registration order is import order (mpicoll.algorithms lists it): keep it as written.
# isort: off
from . import bcast, reduce, allreduce, gather, scatter, allgather  # noqa: F401
from . import reduce_scatter, alltoall, barrier  # noqa: F401
# The vector variants and the prefix reductions (scan.py holds scan and exscan).
from . import gatherv, scatterv, allgatherv, alltoallv, scan  # noqa: F401
from . import shm  # noqa: F401  (shared memory on one node)
from . import hierarchical  # noqa: F401  (node-aware; imports the flat ones it runs)
# isort: on
