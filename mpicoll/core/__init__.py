"""The floor everything stands on: errors, the algorithm registry, ops, defaults, topology.

What lives here: :mod:`.errors` (``ArgumentError`` and the message helpers),
:mod:`.registry` (every primitive's algorithms, filled by ``register``),
:mod:`.ops` (MPI's reduction ops and which dtypes they take), :mod:`.defaults`
(``auto``'s rules and the measured tuning tables in ``tuning/``),
:mod:`.topology` (which ranks share a node), :mod:`.blocks` (block splits and
the power-of-two folding the algorithms share), :mod:`.plugins` (``--import``),
:mod:`.failfast` (ending a whole MPI job when one rank fails) and :mod:`.commcache`
(an object kept per communicator, freed with it).

May import: nothing of mpicoll outside ``core``.
"""
