"""The primitives: one module per collective, each a :class:`~.primitive.Primitive`.

A primitive's module holds its public signature (the *binder* of each of its
functions, from which :mod:`mpicoll.api` makes the blocking, nonblocking and
persistent forms), its one implementation (validation, agreement, launch),
mpi4py's methods of it (from which :mod:`mpicoll.comm` makes ``P2PComm``'s),
how its algorithms are called (for plans without a communicator), its
bench and test spec (:mod:`.spec`), the verifier's symbolic spec and the
soak's case. The algorithms themselves live in
:mod:`mpicoll.coll`. A new primitive is one more module defining one more
:class:`~.primitive.Primitive` (``mpicoll.define_primitive`` for plug-ins).

The v primitives (gatherv, scatterv, allgatherv, alltoallv) share their rules:
the v side of a call is an mpi4py v-buffer spec (:mod:`mpicoll.args.vbuffers`):
``buf``, ``[buf, counts]``, ``[buf, (counts, displs)]``, ``[buf, counts, displs]``,
``[buf, counts, datatype]``, ``[buf, (counts, displs), datatype]`` or
``[buf, counts, displs, datatype]``; a plain array splits into N near-equal
blocks, as in mpi4py. Counts and displacements are in elements. Receive
blocks must not overlap; gaps between them and blocks out of rank order are
fine (gaps are never written). The ranks agree on every rank's count before
any message (:meth:`mpicoll.engine.call.Call.exchange`), so counts that do
not match across ranks raise on every rank instead of truncating or hanging.

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
