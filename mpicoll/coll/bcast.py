"""Broadcast: ``buf`` on ``root`` is copied into ``buf`` on every rank.

Per rank, N = 3, root = 0::

    before: rank 0 [1 2 3]   rank 1 [0 0 0]   rank 2 [0 0 0]
    after:  rank 0 [1 2 3]   rank 1 [1 2 3]   rank 2 [1 2 3]

Costs use the Hockney model: α latency per message, β time per byte,
n bytes in ``buf``, N ranks.
"""
from ..core.blocks import offsets, split
from ..core.registry import register
from ._common import tree_down
from .cost import Cost, even, lg, segments
from .links import Split
from .textbook import F, Textbook, always, ceil_log2, even_chunks

#: Segment size of the pipelined chain (bytes).
PIPELINE_SEGMENT_BYTES = 1 << 16


@register("bcast", "native")
def bcast_native(ctx, buf, root):
    """The MPI library's own ``MPI_Bcast`` on the same buffer."""
    ctx.mpi.Bcast(buf, root)


@register("bcast", "linear", cost=Cost(
    "(N-1)(α + nβ)", alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * k.n,
    links=lambda N, K, n: Split().linear(N, K, n)),
    textbook=Textbook("(N-1)K", "root", "sent",
                      lambda n, k: F((n - 1) * k), always))
def bcast_linear(ctx, buf, root):
    """Root sends the whole buffer to every other rank.

    Cost: (N-1)(α + nβ) on the root; 1 step of N-1 concurrent sends.
    Limits: the root's link carries (N-1)n bytes; fine only for tiny N.
    """
    if ctx.rank == root:
        reqs = [ctx.isend(buf, r) for r in range(ctx.size) if r != root]
        ctx.waitall(reqs)
    else:
        ctx.recv(buf, root)


def binomial_bcast(ctx, buf, root):
    """Binomial-tree broadcast (shared with composite algorithms)."""
    tree_down(ctx, root, lambda mask: buf, lambda mask: buf)


@register("bcast", "binomial", cost=Cost(
    "⌈log2 N⌉(α + nβ)", alpha=lambda k: lg(k.N), beta=lambda k: lg(k.N) * k.n,
    links=lambda N, K, n: Split().tree(N, K, lambda d: n)),
    textbook=Textbook("ceil(log2 N)K", "root", "sent",
                      lambda n, k: F(ceil_log2(n) * k), always))
def bcast_binomial(ctx, buf, root):
    """Binomial tree: in step k, every rank holding the data sends to rank + 2^k.

    Cost: ⌈log2 N⌉(α + nβ); ⌈log2 N⌉ steps. Best for short messages; for long
    ones every byte crosses log N links in sequence.
    """
    binomial_bcast(ctx, buf, root)


@register("bcast", "scatter_allgather", cost=Cost(
    "(⌈log2 N⌉ + N - 1)α + 2(N-1)/N·nβ", alpha=lambda k: lg(k.N) + k.N - 1,
    beta=lambda k: 2 * (k.N - 1) * k.n / k.N, exact=even,
    # the root (scatter) and the node's last rank (ring) send across nodes
    links=lambda N, K, n: Split().tree(N, K, lambda d: min(d, N - d) * n / N)
    .ring(N - 1, n / N).shared(min(K, 2))),
    textbook=Textbook("2(N-1)K/N", "root", "sent",
                      lambda n, k: F(2 * (n - 1) * k, n), even_chunks))
def bcast_scatter_allgather(ctx, buf, root):
    """Van de Geijn: binomial scatter of N chunks, then a ring allgather.

    Cost: (⌈log2 N⌉ + N - 1)α + 2(N-1)/N·nβ; ⌈log2 N⌉ + N - 1 steps.
    Best for long messages (bandwidth term about 2nβ, independent of N).
    Chunks are near-equal (sizes differ by one element when N does not
    divide the count); counts below N leave some chunks empty.
    """
    size, rank = ctx.size, ctx.rank
    rel = (rank - root) % size
    off = offsets(split(buf.size, size))   # chunk j belongs to relative rank j

    def span(lo, hi):
        return buf[off[lo]:off[min(hi, size)]]

    # Binomial scatter: relative rank r receives chunks [r, r + lowbit(r)).
    tree_down(ctx, root, lambda mask: span(rel, rel + mask),
              lambda mask: span(rel + mask, rel + 2 * mask))

    # Ring allgather over relative ranks: step s passes chunk rel - s rightward.
    right, left = (rank + 1) % size, (rank - 1) % size
    for s in range(size - 1):
        sc, rc = (rel - s) % size, (rel - s - 1) % size
        ctx.sendrecv(span(sc, sc + 1), right, span(rc, rc + 1), left)


def _segments(k):
    return segments(k.nbytes, PIPELINE_SEGMENT_BYTES)


def _pipeline_exact(k):
    if k.N < 2:
        return "one rank: nothing moves"
    seg = max(1, PIPELINE_SEGMENT_BYTES // max(1, k.itemsize))
    if _segments(k) > 1 and k.n % seg:
        return f"the last of {_segments(k)} segments is shorter"
    return None


@register("bcast", "pipeline", cost=Cost(
    "(N - 2 + S)(α + (n/S)β)", where={"S": _segments},
    alpha=lambda k: k.N - 2 + _segments(k) if k.N > 1 else 0,
    beta=lambda k: (k.N - 2 + _segments(k)) * k.n / _segments(k) if k.N > 1 else 0,
    # the busiest rank is a middle one: it receives and forwards every segment
    msgs=lambda k: (2 if k.N > 2 else 1) * _segments(k),
    elems=lambda k: (2 if k.N > 2 else 1) * k.n, exact=_pipeline_exact,
    links=lambda N, K, n: Split().chain(N, K, n, segments(n, PIPELINE_SEGMENT_BYTES))),
    textbook=Textbook("(N-1)K", "total", "sent",
                      lambda n, k: F((n - 1) * k), always))
def bcast_pipeline(ctx, buf, root):
    """Segmented chain root -> root+1 -> ... : segments flow like a pipeline.

    Cost: (N - 2 + S)(α + (n/S)β) with S = ⌈n / 64 KiB⌉ segments; N - 2 + S steps.
    Wins for long messages on a linear network; the N-2 fill steps make it
    slow for short messages or large N.
    """
    size, rank = ctx.size, ctx.rank
    if size == 1:
        return
    rel = (rank - root) % size
    seg = max(1, PIPELINE_SEGMENT_BYTES // max(1, buf.itemsize))
    bounds = list(range(0, buf.size, seg)) + [buf.size]
    if buf.size == 0:
        bounds = [0, 0]
    segments = [buf[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    prev, nxt = (rank - 1) % size, (rank + 1) % size
    has_next = rel < size - 1
    sends = []
    if rel == 0:
        sends = [ctx.isend(s, nxt) for s in segments]
    else:
        # Pre-post every receive so segments arrive while earlier ones are forwarded.
        recvs = [ctx.irecv(s, prev) for s in segments]
        for s, r in zip(segments, recvs, strict=True):
            ctx.wait(r)
            if has_next:
                sends.append(ctx.isend(s, nxt))
    ctx.waitall(sends)
