"""The algorithms, one module per primitive; importing this fills the registry."""
from . import bcast, reduce, allreduce, gather, scatter, allgather  # noqa: F401
from . import reduce_scatter, alltoall, barrier  # noqa: F401
