"""Scan and Exscan: prefix reductions in rank order.

Scan (inclusive): rank i gets ranks 0..i reduced. Exscan (exclusive): rank
i gets ranks 0..i-1 reduced; rank 0's ``recvbuf`` is left as it was (MPI
leaves it undefined). Per rank, N = 3, op = SUM::

    sendbuf: rank 0 [1 1]   rank 1 [2 2]   rank 2 [3 3]
    scan:    rank 0 [1 1]   rank 1 [3 3]   rank 2 [6 6]
    exscan:  rank 0 (as it was)   rank 1 [1 1]   rank 2 [3 3]

Algorithms take ``(ctx, sendbuf, recvbuf, op)``; ``sendbuf`` is None when
the call is in place (``recvbuf`` then holds the input). Every algorithm
combines adjacent ranges of ranks, lower ranks first: any op, commutative
or not.
Costs: α per message, β per byte, γ per byte reduced, n bytes per rank.
"""
from mpi4py import MPI

from ..core.ops import op_ufunc
from ..core.registry import register
from ._vcommon import native
from .cost import Cost, lg, pow2


def _chain(k):
    """The busiest rank of a chain: one message in and one out (the ends: one)."""
    return 0 if k.N == 1 else (1 if k.N == 2 else 2)


def _pow2_from_4(k):
    return None if k.N >= 4 and k.N & (k.N - 1) == 0 else \
        f"N = {k.N}: the formula holds for powers of two from 4"


def _in(sendbuf, recvbuf):
    return recvbuf if sendbuf is None else sendbuf


# -- scan ------------------------------------------------------------------

@register("scan", "native")
def scan_native(ctx, sendbuf, recvbuf, op):
    """The MPI library's own ``MPI_Scan``."""
    _native(ctx, "Scan", sendbuf, recvbuf, op)


def _native(ctx, name, sendbuf, recvbuf, op):
    # A user op runs on the host (MPI calls it on host memory); sendbuf None: in place.
    native(ctx, name, MPI.IN_PLACE if sendbuf is None else sendbuf, recvbuf, op,
           outputs=(1,), host=op_ufunc(op) is None)


@register("scan", "linear", cost=Cost(
    "(N-1)(α + nβ + nγ)", alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * k.n,
    gamma=lambda k: (k.N - 1) * k.n, msgs=_chain, elems=lambda k: _chain(k) * k.n,
    reduced=lambda k: k.n if k.N > 1 else 0))
def scan_linear(ctx, sendbuf, recvbuf, op):
    """Chain: rank i receives the prefix of ranks < i from i - 1, adds its own, passes it on.

    Cost: (N-1)(α + nβ + nγ) until the last rank is done; N-1 steps in
    sequence. Each rank sends and receives one message: least traffic,
    longest latency.
    """
    rank, size = ctx.rank, ctx.size
    if rank == 0:
        ctx.copy(recvbuf, sendbuf)
    else:
        tmp = ctx.scratch(recvbuf.size)
        if sendbuf is not None and op_ufunc(op) is not None:
            ctx.recv(tmp, rank - 1)
            ctx.reduce(tmp, sendbuf, recvbuf)      # built-in ops write out=recvbuf
        else:
            # User ops write their second operand, which must not be sendbuf.
            ctx.copy(recvbuf, sendbuf)
            ctx.recv(tmp, rank - 1)
            ctx.reduce(tmp, recvbuf, recvbuf)
    if rank + 1 < size:
        ctx.send(recvbuf, rank + 1)


@register("scan", "recursive_doubling", cost=Cost(
    "⌈log2 N⌉(α + nβ) + 2⌈log2 N⌉nγ", alpha=lambda k: lg(k.N), beta=lambda k: lg(k.N) * k.n,
    gamma=lambda k: 2 * lg(k.N) * k.n, exact=pow2))
def scan_recursive_doubling(ctx, sendbuf, recvbuf, op):
    """Recursive doubling (MPICH's): in step k, swap the partial reduction with rank XOR 2^k.

    Cost: ⌈log2 N⌉(α + nβ) + 2⌈log2 N⌉nγ for N a power of two (the higher
    partner reduces twice: its result and the partial it passes on; less γ
    otherwise); ⌈log2 N⌉ steps, any N.
    Latency-optimal; every rank sends in every step.
    """
    n = recvbuf.size
    own = ctx.scratch(n)            # the reduction of this rank's aligned block of 2^k ranks
    ctx.copy(own, _in(sendbuf, recvbuf))
    ctx.copy(recvbuf, sendbuf)
    for tmp, partial in _lower_partials(ctx, own, ctx.scratch(n)):
        # tmp covers the ranks just below everything recvbuf and partial cover.
        ctx.reduce(tmp, recvbuf, recvbuf)
        ctx.reduce(tmp, partial, partial)


def _lower_partials(ctx, partial, tmp):
    """Recursive doubling's exchanges of ``partial``: yields (lower partner's partial, partial)."""
    rank, size = ctx.rank, ctx.size
    mask = 1
    while mask < size:
        partner = rank ^ mask
        if partner < size:
            ctx.sendrecv(partial, partner, tmp, partner)
            if partner < rank:
                yield tmp, partial          # the caller folds it into partial (and its result)
            elif ctx.reduce(partial, tmp, partial) is tmp:   # user op: result in tmp
                partial, tmp = tmp, partial
        mask <<= 1


@register("scan", "binomial", cost=Cost(
    "(2⌈log2 N⌉ - 1)(α + nβ) + (2⌈log2 N⌉ - 2)nγ", alpha=lambda k: 2 * lg(k.N) - 1,
    beta=lambda k: (2 * lg(k.N) - 1) * k.n, gamma=lambda k: (2 * lg(k.N) - 2) * k.n,
    reduced=lambda k: lg(k.N) * k.n, exact=_pow2_from_4))
def scan_binomial(ctx, sendbuf, recvbuf, op):
    """Binomial tree: an up-sweep builds partial sums of 2^k ranks, a down-sweep completes them.

    Up-sweep, step k: rank i with i + 1 ≡ 2^k (mod 2^(k+1)) sends its range to
    i + 2^k, which prepends it. Afterwards rank i holds ranks
    i + 1 - lowbit(i + 1) .. i, and ranks 2^j - 1 are complete. Down-sweep,
    k from high to low: a complete rank i with i + 1 ≡ 0 (mod 2^(k+1)) sends
    its prefix to i + 2^k. Cost: (2⌈log2 N⌉ - 1)(α + nβ) + (2⌈log2 N⌉ - 2)nγ on
    the longest path, for N a power of two from 4 (shorter at other N); the
    busiest rank reduces ⌈log2 N⌉n. Fewer than 2 messages per rank on average
    (2N in all, against N⌈log2 N⌉ for recursive doubling).
    """
    rank, size = ctx.rank, ctx.size
    ctx.copy(recvbuf, sendbuf)
    tmp = ctx.scratch(recvbuf.size)
    mask = 1
    while mask < size:              # up-sweep
        if (rank + 1) % (2 * mask) == 0:
            ctx.recv(tmp, rank - mask)
            ctx.reduce(tmp, recvbuf, recvbuf)      # both kinds of op write recvbuf
        elif (rank + 1) % (2 * mask) == mask and rank + mask < size:
            ctx.send(recvbuf, rank + mask)
        mask <<= 1
    mask >>= 1
    while mask > 0:                 # down-sweep
        if (rank + 1) % (2 * mask) == 0 and rank + mask < size:
            ctx.send(recvbuf, rank + mask)
        elif (rank + 1) % (2 * mask) == mask and rank >= mask:
            ctx.recv(tmp, rank - mask)
            ctx.reduce(tmp, recvbuf, recvbuf)
        mask >>= 1


# -- exscan ----------------------------------------------------------------

@register("exscan", "native")
def exscan_native(ctx, sendbuf, recvbuf, op):
    """The MPI library's own ``MPI_Exscan``."""
    _native(ctx, "Exscan", sendbuf, recvbuf, op)


@register("exscan", "linear", cost=Cost(
    "(N-1)(α + nβ) + (N-2)nγ", alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * k.n,
    gamma=lambda k: max(0, k.N - 2) * k.n, msgs=_chain, elems=lambda k: _chain(k) * k.n,
    reduced=lambda k: k.n if k.N > 2 else 0,
    exact=lambda k: None if k.N >= 2 else "one rank: nothing moves"))
def exscan_linear(ctx, sendbuf, recvbuf, op):
    """Chain: rank i receives the prefix of ranks < i (its result), adds its own, passes it on.

    Cost: (N-1)(α + nβ) + (N-2)nγ until the last rank is done; N-1 steps in
    sequence. One message in and one out per rank. In place, ranks 1..N-2
    keep a copy of their input (the prefix overwrites it).
    """
    rank, size, n = ctx.rank, ctx.size, recvbuf.size
    last = rank + 1 == size
    if rank == 0:
        if not last:
            ctx.send(_in(sendbuf, recvbuf), 1)
        return
    mine = sendbuf
    if not last and (sendbuf is None or op_ufunc(op) is None):
        # The prefix arrives in recvbuf, and user ops write their second operand:
        # either way this rank's input goes into a scratch copy first.
        mine = ctx.scratch(n)
        ctx.copy(mine, _in(sendbuf, recvbuf))
    ctx.recv(recvbuf, rank - 1)
    if not last:
        out = mine if mine is not sendbuf else ctx.scratch(n)
        ctx.send(ctx.reduce(recvbuf, mine, out), rank + 1)


@register("exscan", "recursive_doubling", cost=Cost(
    "⌈log2 N⌉(α + nβ) + (2⌈log2 N⌉ - 1)nγ", alpha=lambda k: lg(k.N),
    beta=lambda k: lg(k.N) * k.n, gamma=lambda k: (2 * lg(k.N) - 1) * k.n,
    exact=lambda k: None if k.N >= 2 and k.N & (k.N - 1) == 0 else
    f"N = {k.N}: the formula holds for powers of two from 2"))
def exscan_recursive_doubling(ctx, sendbuf, recvbuf, op):
    """Recursive doubling (MPICH's): as scan's, the result built from the lower partners only.

    Cost: ⌈log2 N⌉(α + nβ) + (2⌈log2 N⌉ - 1)nγ for N a power of two (less γ
    otherwise); ⌈log2 N⌉ steps, any N.
    Rank 0 never writes ``recvbuf``.
    """
    n = recvbuf.size
    own = ctx.scratch(n)
    ctx.copy(own, _in(sendbuf, recvbuf))    # before recvbuf (in place: the input) is written
    have = False
    for tmp, partial in _lower_partials(ctx, own, ctx.scratch(n)):
        ctx.reduce(tmp, partial, partial)
        if have:
            ctx.reduce(tmp, recvbuf, recvbuf)
        else:
            ctx.copy(recvbuf, tmp)
            have = True
