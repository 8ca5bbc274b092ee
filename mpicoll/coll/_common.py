"""Helpers shared by the algorithm modules (no communication here).

Algorithms get scratch space and copy through their ``ctx`` (``ctx.scratch``,
``ctx.copy``), which allocate in the memory of the call's arrays (host or
device) and are recorded in plans, so one algorithm body serves NumPy and
CuPy buffers alike. Block layouts and rank folding are :mod:`mpicoll.core.blocks`.
"""
from ..device.arrays import data_ptr

__all__ = ["aliases", "tree_down"]


def aliases(view, buf):
    """True when ``view``'s memory lies inside ``buf`` (an in-place call's block)."""
    if buf is None or view is None:
        return False
    a = data_ptr(view)
    b = data_ptr(buf)
    return b <= a < b + buf.nbytes or (view.nbytes == 0 and a == b)


def tree_down(ctx, root, incoming, outgoing):
    """Down a binomial tree from ``root``: recv ``incoming(mask)``, send ``outgoing(mask)``."""
    size, rel = ctx.size, (ctx.rank - root) % ctx.size
    mask = 1
    while mask < size:
        if rel & mask:
            ctx.recv(incoming(mask), (rel - mask + root) % size)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if rel + mask < size:
            ctx.send(outgoing(mask), (rel + mask + root) % size)
        mask >>= 1
