"""One object per communicator, kept as an MPI attribute and freed with the communicator.

A :class:`CommCache` owns one MPI keyval (made on first use, never freed). The
value it keeps on a communicator lives as long as that communicator: MPI calls
``on_free(value)`` when the communicator is freed (``Free``, ``Disconnect``) or,
for ``COMM_WORLD``/``COMM_SELF``, at ``MPI.Finalize``. The keyval has no copy
function, so a ``Dup`` of the communicator does not inherit the value.

``on_free`` runs inside MPI's attribute deletion: a function that may be called
after finalisation checks ``MPI.Is_finalized()`` itself, and one that must never
fail catches its own exceptions.

Nothing here is collective: ``make`` in :meth:`CommCache.get_or_create` is,
where it calls collectives (a ``Dup``), and then every rank must ask together.
"""
import threading

from mpi4py import MPI

__all__ = ["CommCache"]


class CommCache:
    """A value per communicator (see the module doc). ``on_free(value)``: None for none."""

    def __init__(self, on_free=None):
        self._on_free = on_free
        self._keyval = None
        self._lock = threading.Lock()

    def _delete(self, comm, keyval, value):
        self._on_free(value)

    def keyval(self):
        """The MPI keyval (made once, thread-safely, on first use)."""
        if self._keyval is None:
            with self._lock:
                if self._keyval is None:
                    if self._on_free is None:
                        self._keyval = MPI.Comm.Create_keyval()
                    else:
                        self._keyval = MPI.Comm.Create_keyval(delete_fn=self._delete)
        return self._keyval

    def get(self, comm):
        """The value kept on ``comm``, else None (makes no keyval, calls no collective)."""
        if self._keyval is None:
            return None
        return comm.Get_attr(self._keyval)

    def set(self, comm, value):
        """Keep ``value`` on ``comm`` (a value already there is freed first, by MPI)."""
        comm.Set_attr(self.keyval(), value)

    def get_or_create(self, comm, make):
        """The value kept on ``comm``, made by ``make()`` and kept the first time."""
        value = comm.Get_attr(self.keyval())
        if value is None:
            value = make()
            comm.Set_attr(self._keyval, value)
        return value
