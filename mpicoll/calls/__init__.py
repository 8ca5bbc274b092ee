"""The primitives: one module per collective, each a :class:`~.primitive.Primitive`.

A primitive's module holds its public signature (the *binder* of each of its
functions, from which :mod:`mpicoll.api` makes the blocking, nonblocking and
persistent forms), its one implementation (validation, agreement, launch),
mpi4py's methods of it (from which :mod:`mpicoll.comm` makes ``P2PComm``'s),
how its algorithms are called (for plans without a communicator) and its
bench and test spec (:mod:`.spec`). The algorithms themselves live in
:mod:`mpicoll.coll`. A new primitive is one more module defining one more
:class:`~.primitive.Primitive` (``mpicoll.define_primitive`` for plug-ins).

May import: ``engine``, ``sched``, ``args``, ``device``, ``core`` (and ``coll``).
"""
# the primitives are defined in seed order, then the algorithms are imported
# isort: off
from . import bcast, reduce, allreduce, gather, allgather, scatter  # noqa: F401  (in seed order)
from . import reduce_scatter, alltoall, barrier  # noqa: F401
from . import gatherv, scatterv, allgatherv, alltoallv, scan, exscan  # noqa: F401
from .. import coll  # noqa: F401  (the algorithms: importing them fills the registry)
# isort: on
from .primitive import DEFINED, Primitive, define

__all__ = ["DEFINED", "Primitive", "define"]
