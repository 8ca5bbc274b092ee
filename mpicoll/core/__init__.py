"""The floor everything stands on: errors, the algorithm registry, ops, defaults, topology.

What lives here: :mod:`.errors` (``ArgumentError`` and the message helpers),
:mod:`.registry` (every primitive's algorithms, filled by ``register``),
:mod:`.ops` (MPI's reduction ops and which dtypes they take), :mod:`.rules`
(the language of ``auto``'s rules, which each primitive declares in ``calls/``),
:mod:`.defaults` (``auto``'s choice: the shm step, the measured tuning tables in
``tuning/``, then the primitive's rule),
:mod:`.topology` (which ranks share a node), :mod:`.blocks` (block splits and
the power-of-two folding the algorithms share), :mod:`.plugins` (``--import``),
:mod:`.failfast` (ending a whole MPI job when one rank fails) and :mod:`.commcache`
(an object kept per communicator, freed with it).

May import: nothing of mpicoll outside ``core``.
"""
