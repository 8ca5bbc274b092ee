"""The documented default ("auto") algorithm of each primitive.

Rules follow MPICH's classic thresholds, adjusted so that a non-commutative
op always gets an algorithm that keeps rank order. ``nbytes`` is the size of
one rank's contribution (the whole vector for reductions and bcast, one
block for gather/scatter/allgather/alltoall).
"""

__all__ = ["default_algorithm", "DEFAULTS_TABLE"]

SHORT = 2048          # bytes: latency-bound below this
LONG = 512 * 1024     # bytes: bandwidth-bound above this

#: primitive -> human description of the rule (README and --help quote it).
DEFAULTS_TABLE = {
    "bcast": "binomial below 12 KiB or N < 8, else scatter_allgather",
    "reduce": "rabenseifner for commutative ops from 2 KiB when count >= 2^⌊log2 N⌋, else binomial",
    "allreduce": "recursive_doubling up to 2 KiB or for non-commutative ops, else ring",
    "gather": "binomial",
    "scatter": "binomial",
    "allgather": "recursive_doubling when N·n < 80 KiB, else ring",
    "reduce_scatter": "recursive_halving up to 512 KiB, else pairwise; reduce_scatterv for non-commutative ops",
    "alltoall": "bruck for blocks up to 256 B when N >= 8, else pairwise",
    "barrier": "dissemination",
}


def default_algorithm(primitive, *, size, nbytes=0, count=0, commutative=True):
    """Name of the algorithm ``auto`` resolves to for this call."""
    if primitive == "bcast":
        return "binomial" if nbytes < 12288 or size < 8 else "scatter_allgather"
    if primitive == "reduce":
        pof2 = 1 << (size.bit_length() - 1)
        if commutative and nbytes >= SHORT and count >= pof2 and size > 1:
            return "rabenseifner"
        return "binomial"
    if primitive == "allreduce":
        return "recursive_doubling" if nbytes <= SHORT or not commutative else "ring"
    if primitive in ("gather", "scatter"):
        return "binomial"
    if primitive == "allgather":
        return "recursive_doubling" if nbytes * size < 80 * 1024 else "ring"
    if primitive == "reduce_scatter":
        if not commutative:
            return "reduce_scatterv"
        return "recursive_halving" if nbytes <= LONG else "pairwise"
    if primitive == "alltoall":
        return "bruck" if nbytes <= 256 and size >= 8 else "pairwise"
    if primitive == "barrier":
        return "dissemination"
    raise KeyError(primitive)
