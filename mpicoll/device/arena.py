"""Pinned host staging: page-locked blocks reused across calls, one per thread and device.

:class:`PinnedArena` hands out slots of one page-locked host block for the
staged transport (:class:`mpicoll.device.transport.StagedTransport`) and the
host copies of small device calls (:mod:`mpicoll.engine.host_copy`);
:func:`arena_for` keeps one per thread and (library, device),
:func:`staging_stats` shows their reuse and :func:`release_staging` drops them.
"""
import threading

import numpy as np

__all__ = ["ALIGN", "PinnedArena", "arena_for", "staging_stats", "release_staging",
           "thread_arenas", "ON_RELEASE"]


ALIGN = 256   # bytes: every staged block starts at a multiple (vector loads, DMA)


class PinnedArena:
    """Bump allocator over one page-locked host block, reused across calls.

    Slots are taken for the life of one message (blocking calls) or until
    the request completes (non-blocking); when no slot is live the block is
    reused from its start. A request that does not fit allocates a larger
    block (at least twice the old one, room for two such slots); slots
    already handed out keep the old block alive until they are released.
    The block only grows: :func:`release_staging` gives it back.
    """

    def __init__(self, adapter, minimum=1 << 16):
        self.adapter = adapter
        self.minimum = minimum     # bytes of the first block (mirrors of one request: less)
        self.block = None
        self.top = 0
        self.live = 0
        self.allocations = 0       # pinned blocks allocated so far
        self.takes = 0             # slots handed out so far

    @property
    def capacity(self):
        """Bytes of the current block (0 before the first)."""
        return 0 if self.block is None else self.block.nbytes

    def take(self, dtype, count):
        """A host array of ``count`` elements of ``dtype`` in pinned memory."""
        nbytes = count * np.dtype(dtype).itemsize
        if self.live == 0:
            self.top = 0               # nothing in flight: reuse the block from its start
        self.live += 1
        self.takes += 1
        if nbytes == 0:
            # NumPy gives an empty slice the block's start address, which MPI
            # would take for an aliased buffer: empty slots are their own.
            return np.empty(0, dtype)
        if self.block is None or self.top + nbytes > self.capacity:
            # Room for two slots of this size: a staged Sendrecv takes a pair.
            size = max(2 * self.capacity, 2 * (nbytes + ALIGN), self.minimum)
            self.block = self.adapter.pinned(size)
            self.allocations += 1
            self.top = 0
        view = self.block[self.top:self.top + nbytes].view(dtype)
        self.top += -(-nbytes // ALIGN) * ALIGN
        return view

    def give(self, n=1):
        """Give back ``n`` slots (no longer live)."""
        self.live -= n


_arenas = threading.local()


def arena_for(adapter, device):
    """This thread's :class:`PinnedArena` for ``adapter``'s arrays on ``device`` (made once)."""
    table = getattr(_arenas, "table", None)
    if table is None:
        table = _arenas.table = {}
    key = (adapter.name, device)
    arena = table.get(key)
    if arena is None:
        arena = table[key] = PinnedArena(adapter)
    return arena


def staging_stats():
    """This thread's pinned arenas: ``{(library, device): {...}}`` (reuse is visible here)."""
    table = getattr(_arenas, "table", {})
    return {k: {"capacity_bytes": a.capacity, "allocations": a.allocations, "slots": a.takes,
                "live": a.live} for k, a in table.items()}


def release_staging():
    """Drop this thread's pinned blocks (the next staged call allocates again)."""
    _arenas.table = {}
    for hook in ON_RELEASE:
        hook()


#: Called by :func:`release_staging` (the memo forgets its device entries, which hold
#: transports and their arenas).
ON_RELEASE = []


def thread_arenas():
    """This thread's arenas ``{(library, device): PinnedArena}``, None before the first.

    :func:`release_staging` replaces the table: its identity is part of
    :func:`mpicoll.device.transport.transport_key`.
    """
    return getattr(_arenas, "table", None)
