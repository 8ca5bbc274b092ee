"""The α-β-γ cost of each hand-written algorithm, as its docstring states it.

``cost(primitive, algorithm, N, n, alpha, beta, gamma)`` -> seconds, with
``n`` in each primitive's own unit (the ``nbytes`` mpicoll's ``auto`` sees):
the whole vector for bcast, reduce, allreduce and reduce_scatter; one rank's
block for gather, allgather, scatter and alltoall; 0 for barrier.
α: seconds per message, β: seconds per byte sent, γ: seconds per byte reduced.
"""
from math import ceil, log2

__all__ = ["COSTS", "cost", "has_cost"]


def _lg(n):
    return ceil(log2(n)) if n > 1 else 0


def _p(n):
    return 1 << (n.bit_length() - 1)


def _fold(N):
    return 0 if N == _p(N) else 1


def _pipeline(N, n, a, b, g):
    s = max(1, ceil(n / 65536))
    return (N - 2 + s) * (a + n / s * b) if N > 1 else 0.0


COSTS = {
    "bcast": {
        "linear": lambda N, n, a, b, g: (N - 1) * (a + n * b),
        "binomial": lambda N, n, a, b, g: _lg(N) * (a + n * b),
        "scatter_allgather": lambda N, n, a, b, g: (_lg(N) + N - 1) * a + 2 * (N - 1) / N * n * b,
        "pipeline": _pipeline,
    },
    "reduce": {
        "linear": lambda N, n, a, b, g: (N - 1) * (a + n * b + n * g),
        "binomial": lambda N, n, a, b, g: _lg(N) * (a + n * b + n * g),
        "rabenseifner": lambda N, n, a, b, g: (
            2 * _lg(_p(N)) * a + 2 * (_p(N) - 1) / _p(N) * n * b + (_p(N) - 1) / _p(N) * n * g
            + _fold(N) * (a + n * b + n * g)),
    },
    "allreduce": {
        "reduce_bcast": lambda N, n, a, b, g: 2 * _lg(N) * (a + n * b) + _lg(N) * n * g,
        "recursive_doubling": lambda N, n, a, b, g: (
            _lg(_p(N)) * (a + n * b + n * g) + _fold(N) * (2 * (a + n * b) + n * g)),
        "ring": lambda N, n, a, b, g: (
            2 * (N - 1) * a + 2 * (N - 1) / N * n * b + (N - 1) / N * n * g),
        "rabenseifner": lambda N, n, a, b, g: (
            2 * _lg(_p(N)) * a + 2 * (_p(N) - 1) / _p(N) * n * b + (_p(N) - 1) / _p(N) * n * g
            + _fold(N) * (2 * (a + n * b) + n * g)),
    },
    "gather": {
        "linear": lambda N, n, a, b, g: (N - 1) * a + (N - 1) * n * b,
        "binomial": lambda N, n, a, b, g: _lg(N) * a + (N - 1) * n * b,
    },
    "allgather": {
        "ring": lambda N, n, a, b, g: (N - 1) * (a + n * b),
        "recursive_doubling": lambda N, n, a, b, g: (
            _lg(_p(N)) * a + (_p(N) - 1) / _p(N) * N * n * b
            + _fold(N) * (2 * a + (N + 1) * n * b)),
        "bruck": lambda N, n, a, b, g: _lg(N) * a + (N - 1) * n * b,
        "gather_bcast": lambda N, n, a, b, g: 2 * _lg(N) * a + (N - 1) * n * b + _lg(N) * N * n * b,
    },
    "scatter": {
        "linear": lambda N, n, a, b, g: (N - 1) * (a + n * b),
        "binomial": lambda N, n, a, b, g: _lg(N) * a + (N - 1) * n * b,
    },
    "reduce_scatter": {
        "ring": lambda N, n, a, b, g: (N - 1) * (a + n / N * b + n / N * g),
        "recursive_halving": lambda N, n, a, b, g: (
            _lg(_p(N)) * a + (_p(N) - 1) / _p(N) * n * (b + g) + _fold(N) * (2 * a + n * b + n * g)),
        "pairwise": lambda N, n, a, b, g: (N - 1) * a + (N - 1) / N * n * (b + g),
        "reduce_scatterv": lambda N, n, a, b, g: _lg(N) * (a + n * b + n * g) + (N - 1) * a + n * b,
    },
    "alltoall": {
        "pairwise": lambda N, n, a, b, g: (N - 1) * (a + n * b),
        "bruck": lambda N, n, a, b, g: _lg(N) * a + _lg(N) * (N / 2) * n * b,
    },
    "barrier": {
        "linear": lambda N, n, a, b, g: 2 * (N - 1) * a,
        "binomial": lambda N, n, a, b, g: 2 * _lg(N) * a,
        "dissemination": lambda N, n, a, b, g: _lg(N) * a,
    },
}


def has_cost(primitive, algorithm):
    return algorithm in COSTS.get(primitive, {})


def cost(primitive, algorithm, N, n, alpha, beta, gamma):
    """Predicted seconds of one call (without mpicoll's per-call overhead)."""
    return COSTS[primitive][algorithm](N, n, alpha, beta, gamma)
