"""The algorithms, one module per primitive; importing this fills the registry."""
from . import bcast, reduce, allreduce, gather, scatter, allgather  # noqa: F401
from . import reduce_scatter, alltoall, barrier  # noqa: F401
# The vector variants and the prefix reductions (scan.py holds scan and exscan).
from . import gatherv, scatterv, allgatherv, alltoallv, scan  # noqa: F401
from . import hierarchical  # noqa: F401  (node-aware; imports the flat ones it runs)
