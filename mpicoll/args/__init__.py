"""What a call is given: buffers, buffer protocols, derived datatypes, v-buffer specs, user ops.

What lives here: :mod:`.buffers` (user arrays checked and flattened),
:mod:`.protocols` (objects exposing DLPack or ``__cuda_array_interface__``
seen as arrays), :mod:`.datatypes` (derived MPI datatypes packed and
unpacked at the boundary of a call), :mod:`.vbuffers` (mpi4py's v-buffer
specs) and :mod:`.user_ops` (user-defined ops over derived datatypes).
Every check raises :class:`mpicoll.ArgumentError` naming the argument; nothing
here sends a message.

May import: ``device``, ``core``.
"""
