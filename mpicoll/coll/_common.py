"""Small helpers shared by the algorithm modules (no communication here).

Algorithms get scratch space and copy through their ``ctx`` (``ctx.scratch``,
``ctx.copy``), which allocate in the memory of the call's arrays (host or
device) and are recorded in plans, so one algorithm body serves NumPy and
CuPy buffers alike.
"""
from .._device import data_ptr

__all__ = ["aliases", "split", "offsets", "pof2_below", "fold_rank", "unfold_rank", "first_rank",
           "copy_in"]


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


def copy_in(dst, src):
    """dst[...] = src unless src is None (in place) or the very same memory."""
    if src is None or src is dst:
        return
    if (src.size == dst.size
            and data_ptr(src) == data_ptr(dst)):
        return                      # in place: the block is already there
    dst[...] = src


def aliases(view, buf):
    """True when ``view``'s memory lies inside ``buf`` (an in-place call's block)."""
    if buf is None or view is None:
        return False
    a = data_ptr(view)
    b = data_ptr(buf)
    return b <= a < b + buf.nbytes or (view.nbytes == 0 and a == b)
