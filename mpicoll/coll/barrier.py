"""Barrier: no rank leaves before every rank has entered.

Per rank, N = 3: rank 0 enters at t=0, rank 1 at t=1, rank 2 at t=2;
all three leave at t≈2.

Costs in messages of zero bytes: α each.
"""
from ..core.registry import register
from .cost import Cost, lg
from .links import Split
from .textbook import F, Textbook, always, ceil_log2


@register("barrier", "native")
def barrier_native(ctx):
    """The MPI library's own ``MPI_Barrier``."""
    ctx.mpi.Barrier()


@register("barrier", "linear", cost=Cost(
    "2(N-1)α", alpha=lambda k: 2 * (k.N - 1),
    links=lambda N, K, n: Split().linear(N, K, 0).linear(N, K, 0)),
          textbook=Textbook("N-1", "rank0", "msgs",
                            lambda n, k: F(n - 1), always))
def barrier_linear(ctx):
    """Everyone reports to rank 0, which then releases everyone.

    Cost: 2(N-1)α at rank 0; 2 steps. Rank 0 is the bottleneck.
    """
    size, rank = ctx.size, ctx.rank
    token = ctx.scratch(0)
    if rank == 0:
        ctx.waitall([ctx.irecv(token, r) for r in range(1, size)])
        ctx.waitall([ctx.isend(token, r) for r in range(1, size)])
    else:
        ctx.send(token, 0)
        ctx.recv(token, 0)


@register("barrier", "binomial", cost=Cost(
    "2⌈log2 N⌉α", alpha=lambda k: 2 * lg(k.N),
    links=lambda N, K, n: Split().tree(N, K, lambda d: 0).tree(N, K, lambda d: 0)),
          textbook=Textbook("2(N-1)", "total", "msgs",
                            lambda n, k: F(2 * (n - 1)), always))
def barrier_binomial(ctx):
    """Binomial gather of empty messages to rank 0, then a binomial release.

    Cost: 2⌈log2 N⌉α; 2⌈log2 N⌉ steps.
    """
    size, rank = ctx.size, ctx.rank
    token = ctx.scratch(0)
    mask = 1
    while mask < size:
        if rank & mask:
            ctx.send(token, rank - mask)
            ctx.recv(token, rank - mask)
            break
        if rank + mask < size:
            ctx.recv(token, rank + mask)
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if rank + mask < size and not rank & mask:
            ctx.send(token, rank + mask)
        mask >>= 1


@register("barrier", "dissemination", cost=Cost(
    "⌈log2 N⌉α", alpha=lambda k: lg(k.N),
    links=lambda N, K, n: Split().shift_all(K, lg(N), 0)),
          textbook=Textbook("ceil(log2 N)", "each", "msgs",
                            lambda n, k: F(ceil_log2(n)), always))
def barrier_dissemination(ctx):
    """Dissemination: in round k, signal rank + 2^k and wait for rank - 2^k.

    Cost: ⌈log2 N⌉α, for any N; ⌈log2 N⌉ rounds, no rank is a bottleneck.
    """
    size, rank = ctx.size, ctx.rank
    token = ctx.scratch(0)
    k = 1
    while k < size:
        ctx.sendrecv(token, (rank + k) % size, token, (rank - k) % size)
        k <<= 1
