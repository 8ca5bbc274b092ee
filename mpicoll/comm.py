"""``P2PComm``: a drop-in ``mpi4py.MPI.Intracomm`` whose collectives are mpicoll's.

::

    from mpi4py import MPI
    import mpicoll
    comm = mpicoll.P2PComm(MPI.COMM_WORLD, allreduce="ring", bcast="pipeline")
    comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)   # runs allreduce_ring
    comm.Send(...), comm.Split(...)                # the wrapped communicator's own

Overridden, in their blocking, nonblocking (``I...``) and persistent
(``..._init``) faces: Bcast, Reduce, Allreduce, Gather, Allgather, Scatter,
Reduce_scatter_block, Reduce_scatter, Alltoall, Barrier, and (parsed in
:mod:`mpicoll.calls` like the others) Gatherv, Scatterv, Allgatherv, Alltoallv, Scan,
Exscan. Everything else — Alltoallw, the neighbourhood collectives, the
lowercase pickle-based methods, point-to-point, communicator management —
is the wrapped communicator's own.

Buffers take every form mpi4py takes (:func:`mpicoll.args.bufspec.parse_bufspec`): ``buf``,
``[buf, datatype]``, ``[buf, count]``, ``[buf, count, datatype]``,
``[buf, (count, displ), datatype]``, ``[buf, count, displ, datatype]``,
``[None, datatype]`` (or ``[None, 0, datatype]``) for an empty message,
``MPI.IN_PLACE`` or None where MPI allows in-place; ``buf`` is any object
mpi4py takes — the buffer protocol, DLPack, ``__cuda_array_interface__``
(:mod:`mpicoll.args.protocols`: viewed, never copied, so results land in the
caller's object). Datatypes are predefined or derived; derived ones are
packed and unpacked by MPI at the boundary of the call
(:mod:`mpicoll.args.datatypes`), the algorithms running on the packed elements.
Errors are :class:`mpicoll.ArgumentError`, an ``MPI.Exception`` with MPI's
error class, raised on every rank before any message.
"""
from mpi4py import MPI

from .args.bufspec import parse_bufspec
from .core.errors import ArgumentError, ArgumentTypeError, describe
from .core.registry import PRIMITIVES, lookup
from .p2p_calls import method_faces
from .p2p_methods import P2PMethods

__all__ = ["P2PComm", "parse_bufspec", "add_methods"]


class P2PComm(P2PMethods, MPI.Intracomm):
    """An ``MPI.Intracomm`` whose collectives run mpicoll's hand-written algorithms.

    ``P2PComm(comm, **choices)`` shares ``comm``'s handle (nothing is
    duplicated or freed); ``choices`` maps primitive names to algorithm
    names, e.g. ``allreduce="ring"``; unnamed primitives use
    ``MPICOLL_<PRIMITIVE>_ALGORITHM``, ``MPICOLL_ALGORITHM`` or ``auto``.
    ``Dup()`` and ``Clone()`` keep the choices.
    """

    def __new__(cls, comm=None, *args, **kwargs):
        """Check ``comm`` is an ``MPI.Intracomm``; the new object shares its handle."""
        if comm is not None and not isinstance(comm, MPI.Intracomm):
            raise ArgumentTypeError(
                f"comm: expected an mpi4py.MPI.Intracomm; got {describe(comm)}", MPI.ERR_COMM)
        return super().__new__(cls, comm)

    def __init__(self, comm=None, **choices):
        if comm is not None and not isinstance(comm, MPI.Intracomm):
            raise ArgumentTypeError(
                f"comm: expected an mpi4py.MPI.Intracomm; got {describe(comm)}", MPI.ERR_COMM)
        for prim, name in choices.items():
            if prim not in PRIMITIVES:
                raise ArgumentError(
                    f"{prim}: not a primitive; expected keywords among {', '.join(PRIMITIVES)}")
            if name != "auto":
                lookup(prim, name)
        self._choices = dict(choices)

    @property
    def choices(self):
        """The algorithm chosen per primitive (a copy)."""
        return dict(getattr(self, "_choices", {}))

    def _algo(self, primitive):
        return getattr(self, "_choices", {}).get(primitive)

    def Dup(self, info=None):
        """Duplicate the communicator (with ``info`` when given), keeping its algorithm choices."""
        new = super().Dup(info) if info is not None else super().Dup()
        new._choices = self.choices
        return new

    def Clone(self):
        """Clone the communicator, keeping its algorithm choices."""
        new = super().Clone()
        new._choices = self.choices
        return new


def add_methods(primitive):
    """Give :class:`P2PComm` the methods of a primitive defined at run time.

    Blocking, ``I...`` and ``..._init`` (the built-in primitives' methods are written out
    in :mod:`mpicoll.p2p_methods`).
    """
    for method in primitive.methods:
        for face in method_faces(primitive, method):
            setattr(P2PComm, face.__name__, face)
