"""The MPI library's own collectives in the simulation: SMPI's implementations of them.

A native call is one collective action per rank (sizes in bytes, the
replay's ``MPI_BYTE``), which SMPI runs with the algorithm its settings name:

- ``native[ompi]``: SMPI's Open MPI selector (``--cfg=smpi/coll-selector:ompi``),
  Open MPI's ``coll/tuned`` decision rules;
- ``native[mpich]``: MPICH's decision rules as SMPI writes them
  (``smpi_mpich_selector.cpp``), applied here and the chosen algorithm forced
  (``--cfg=smpi/allreduce:rab_rdb`` ...): SimGrid 3.32's own ``mpich``
  selector crashes in the replay for allreduce and bcast (it first builds
  SMP communicators and dereferences the replay's ``MPI_OP_NULL``), so its
  flat branch — what MPICH runs on one rank per node — is taken.

SMPI's replay reduces nothing (its op is ``MPI_OP_NULL``): the reduction
work of a native reducing call is added as one local step after it, of the
bytes its algorithm reduces on the critical path (:func:`reduced_bytes`; an
estimate for Open MPI's choices: ``n(p-1)/p``).
"""
__all__ = ["SELECTORS", "mpich_choice", "actions", "settings", "reduced_bytes", "PRIMITIVES"]

SELECTORS = ("mpich", "ompi")
PRIMITIVES = ("allreduce", "bcast", "allgather", "reduce_scatter", "reduce")


def _pof2(n):
    return 1 << (n.bit_length() - 1)


def mpich_choice(primitive, nranks, nbytes, itemsize):
    """SMPI's MPICH algorithm for one call (``nbytes``: the bench's unit, :func:`actions`)."""
    N, count = nranks, nbytes // itemsize
    if primitive == "allreduce":
        return "rab_rdb" if nbytes > 2048 and count >= _pof2(N) else "rdb"
    if primitive == "bcast":
        if nbytes < 12288 or N <= 8:
            return "binomial_tree"
        return "scatter_rdb_allgather" if nbytes < 524288 and N % 2 == 0 else \
            "scatter_LR_allgather"
    if primitive == "allgather":
        if N == _pof2(N) and nbytes < 524288:
            return "rdb"
        return "bruck" if nbytes <= 81920 else "ring"
    if primitive == "reduce_scatter":
        return "mpich_pair" if nbytes > 524288 else "mpich_rdb"
    if primitive == "reduce":
        return "binomial" if count < _pof2(N) or nbytes < 2048 else "scatter_gather"
    raise ValueError(f"native[mpich]: no rules for {primitive}")


def settings(primitive, selector, nranks, nbytes, itemsize):
    """(``--cfg`` settings, algorithm name) of a native call."""
    if selector == "ompi":
        return ("--cfg=smpi/coll-selector:ompi",), "ompi"
    if selector == "mpich":
        alg = mpich_choice(primitive, nranks, nbytes, itemsize)
        return (f"--cfg=smpi/{primitive}:{alg}",), alg
    raise ValueError(f"native selector: expected one of {', '.join(SELECTORS)}; got {selector!r}")


def reduced_bytes(primitive, algorithm, nranks, nbytes):
    """Bytes one rank reduces along the critical path of a native reducing call (0: none)."""
    N = nranks
    if primitive not in ("allreduce", "reduce_scatter", "reduce") or N < 2:
        return 0
    lg = (N - 1).bit_length()
    if algorithm in ("rdb", "binomial"):
        return nbytes * lg
    return nbytes * (N - 1) // N


def actions(primitive, rank, nranks, nbytes, root=0):
    """The TI action lines of one native call on ``rank``.

    ``nbytes``: the bench's size — the vector (allreduce, bcast, reduce), all
    ranks' blocks together (allgather, reduce_scatter).
    """
    N = nranks
    if primitive == "allreduce":
        return [f"{rank} allreduce {nbytes} 0"]
    if primitive == "bcast":
        return [f"{rank} bcast {nbytes} {root}"]
    if primitive == "reduce":
        return [f"{rank} reduce {nbytes} 0 {root}"]
    if primitive == "allgather":
        b = nbytes // N
        return [f"{rank} allgather {b} {b}"]
    if primitive == "reduce_scatter":
        b = nbytes // N
        return [f"{rank} reducescatter " + " ".join([str(b)] * N) + " 0"]
    raise ValueError(f"native: no SMPI action written for {primitive} "
                     f"(supported: {', '.join(PRIMITIVES)})")
