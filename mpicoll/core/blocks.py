"""Block layouts and the power-of-two folding the algorithms share (pure arithmetic).

``split`` and ``offsets`` lay out near-equal chunks; ``pof2_below``,
``fold_rank``, ``unfold_rank`` and ``first_rank`` are MPICH's folding of a
non-power-of-two number of ranks onto a power of two.
"""

__all__ = ["split", "offsets", "pof2_below", "fold_rank", "unfold_rank", "first_rank"]


def split(n, parts):
    """Sizes of ``parts`` near-equal chunks of ``n`` (the first ``n % parts`` one larger)."""
    q, r = divmod(n, parts)
    return [q + 1] * r + [q] * (parts - r)


def offsets(sizes):
    """Prefix sums: chunk ``i`` spans ``[off[i], off[i+1])``; ``len(off) == len(sizes)+1``."""
    off = [0]
    for s in sizes:
        off.append(off[-1] + s)
    return off


def pof2_below(n):
    """Largest power of two <= n (n >= 1)."""
    return 1 << (n.bit_length() - 1)


# Non-power-of-two folding, as MPICH does it: with p = pof2_below(N) and
# rem = N - p, the first 2*rem ranks pair up (even rank -> odd rank); the odd
# one stands for both in the power-of-two phase. Virtual rank v stands for the
# contiguous original ranks [first(v), first(v+1)), so rank order is kept.

def fold_rank(rank, rem):
    """Virtual rank in the power-of-two phase, or -1 for a rank folded out."""
    if rank < 2 * rem:
        return -1 if rank % 2 == 0 else rank // 2
    return rank - rem


def unfold_rank(v, rem):
    """The real rank that plays virtual rank ``v``."""
    return 2 * v + 1 if v < rem else v + rem


def first_rank(v, rem):
    """First original rank that virtual rank ``v`` stands for."""
    return 2 * v if v < rem else v + rem
