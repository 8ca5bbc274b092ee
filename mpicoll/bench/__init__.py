"""``python -m mpicoll.bench``: measure mpicoll's algorithms beside the MPI library's own.

Under ``mpirun``/``srun``::

    python -m mpicoll.bench allreduce -b 16 -e 64M -f 4 --algorithm all -J out.jsonl

runs every algorithm of a primitive, the MPI library's own collective
through mpicoll (``native``) and the plain mpi4py call (``raw``) on the same
buffers, size by size: an untimed correctness pass (``#wrong``), warm-up, a
timed loop (each rank's mean per call, reduced across ranks as min/avg/max,
OSU's way) and bandwidths in nccl-tests' terms (algbw, busbw). Serial
subcommands read the JSON-lines results: ``report``, ``plot``, ``predict``;
``fit``, ``tune`` and ``--trace`` run under MPI. ``python -m mpicoll.bench --help`` lists them.

Modules: :mod:`.cli` (arguments), :mod:`.units` (sizes, dtypes, ops),
:mod:`.specs` (one spec per primitive), :mod:`.harness` (the sweep),
:mod:`.native` (forcing the MPI library's algorithm), :mod:`.raw` (the plain
mpi4py call, no mpicoll layer, as the ``raw`` reference column), :mod:`.nccl`
(NCCL's collectives as a reference column, ``--xp cupy``), :mod:`.provenance`,
:mod:`.results` (JSON lines, CSV), :mod:`.report`, :mod:`.plot`,
:mod:`.trace`, :mod:`.model` (the fit and predict commands: :mod:`.fit`,
:mod:`.predict`; :mod:`.formula_prices` the formulas,
:mod:`.plan_prices` the plan-derived model of algorithms without one), :mod:`.tune`.
The algorithms are the registry's: ``--import`` loads plug-ins.
"""
