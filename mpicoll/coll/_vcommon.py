"""Helpers shared by the vector (v) algorithms: block layouts and zero-skipping messages.

A v-collective's blocks have per-rank ``counts`` (elements) and, in the
buffer that holds all of them, per-rank ``displs``: block ``r`` is
``buf[displs[r]:displs[r] + counts[r]]``. Displacements may leave gaps or run
out of rank order; receive blocks never overlap (the API layer checks).

Every count is known to both ends of a message (the API layer makes sure
every rank has the counts an algorithm reads), so a message of zero
elements is skipped on both sides instead of being sent empty.
No communication here except through ``ctx``.
"""
from ..device.arrays import collectives_aware

__all__ = ["block", "span", "subtotal", "pack", "unpack", "exchange", "native", "tree_ranks",
           "child_ranks", "tree_place"]


def block(buf, counts, displs, r):
    """Rank ``r``'s block of a v-buffer: a contiguous slice."""
    d = displs[r]
    return buf[d:d + counts[r]]


def subtotal(counts, ranks):
    """Elements in the blocks of ``ranks``."""
    return sum(counts[r] for r in ranks)


def tree_ranks(size, root, lo, hi):
    """Absolute ranks of the relative ranks [lo, hi) of a tree rooted at ``root``."""
    return [(v + root) % size for v in range(lo, hi)]


def child_ranks(size, root, rel, mask):
    """The ranks of the subtree of relative rank ``rel``'s binomial child ``rel + mask``."""
    lo = rel + mask
    return tree_ranks(size, root, lo, lo + min(mask, size - lo))


def tree_place(size, rank, root, counts):
    """(relative rank, subtree size, parent, its subtree's elements) in the binomial tree."""
    rel = (rank - root) % size
    low = rel & -rel
    subtree = size if rel == 0 else min(low, size - rel)
    n = subtotal(counts, tree_ranks(size, root, rel, rel + subtree))
    return rel, subtree, (rel - low + root) % size, n


def span(counts, displs, ranks):
    """Where the blocks of ``ranks`` start when they lie back to back, in this order; else None.

    Zero-count blocks occupy nothing and are ignored. When it is not None,
    the blocks can be sent or received as one slice, without packing.
    """
    start = end = None
    for r in ranks:
        c = counts[r]
        if not c:
            continue
        if start is None:
            start, end = displs[r], displs[r] + c
        elif displs[r] != end:
            return None
        else:
            end += c
    return 0 if start is None else start


def pack(ctx, dst, src, counts, displs, ranks):
    """Copy the blocks of ``ranks`` from ``src`` (at ``displs``) back to back into ``dst``."""
    off = 0
    for r in ranks:
        c = counts[r]
        if c:
            ctx.copy(dst[off:off + c], block(src, counts, displs, r))
            off += c


def unpack(ctx, dst, src, counts, displs, ranks):
    """Copy back-to-back blocks of ``ranks`` from ``src`` to their ``displs`` in ``dst``."""
    off = 0
    for r in ranks:
        c = counts[r]
        if c:
            ctx.copy(block(dst, counts, displs, r), src[off:off + c])
            off += c


def exchange(ctx, sendbuf, dest, recvbuf, source):
    """``ctx.sendrecv`` that leaves out an empty side (its peer leaves it out too).

    Safe inside the step-wise patterns of the v algorithms: a rank that only
    sends targets a rank that receives in the same step, and every receive
    of a step is posted without waiting on anything else of that step.
    """
    if sendbuf.size and recvbuf.size:
        ctx.sendrecv(sendbuf, dest, recvbuf, source)
    elif sendbuf.size:
        ctx.send(sendbuf, dest)
    elif recvbuf.size:
        ctx.recv(recvbuf, source)


def native(ctx, name, *args, outputs=(), host=False):
    """The MPI library's own collective ``name`` on this call's buffers.

    Host buffers: ``ctx.comm.<name>(*args)``. Device buffers go to the
    library directly only where it takes them in its collectives (CUDA-aware
    path and :func:`mpicoll.device.arrays.collectives_aware`) and, with ``host``
    (a user op: its Python function reads host memory), never. Otherwise
    every device array, in a v-buffer list or not, goes through a host copy
    here: the transports stage top-level arrays of the block collectives
    only. The arguments at ``outputs`` are copied back after the call (a
    receive buffer is copied down too: its gaps and, in place, its input
    must survive).
    """
    mpi = ctx.mpi
    if mpi is ctx.comm:
        return getattr(mpi, name)(*args)
    ad = mpi.adapter
    if not host and getattr(mpi, "path", "") == "cuda-aware" and collectives_aware()[0]:
        ad.sync()                       # the library reads device memory: kernels done first
        return getattr(ctx.comm, name)(*args)
    back = []

    def down(a, out):
        if isinstance(a, list):
            return [down(x, out) for x in a]
        if a is not None and ad.matches(a):
            h = ad.asnumpy(a)
            if out:
                back.append((h, a))
            return h
        return a
    hargs = [down(a, i in outputs) for i, a in enumerate(args)]
    getattr(ctx.comm, name)(*hargs)
    for h, d in back:
        ad.to_device(h, d)
