"""A primitive's two statements of what a call must leave say the same thing.

Each primitive declares what a call leaves twice, for two readers: its symbolic
spec (``symbolic`` in ``mpicoll/calls/<primitive>.py``: every rank's buffers as
symbolic values, for ``python -m mpicoll.verify``) and its bench spec's check data
(``Spec.input_fn`` / ``Spec.output_fn``: closed forms over a buffer's elements, fast
at any size and on device arrays, for the bench's and the generated matrix's check).
This test evaluates the symbolic spec on the bench spec's input data and requires the
bench spec's expected output, element by element: so the generated matrix, the bench
and the verifier check against one meaning of each primitive, whichever of the two
they read. Serial: both specs are evaluated for every rank here.
"""
from functools import partial

import numpy as np
import pytest
from bench_cases import every_rank

from mpicoll.calls import DEFINED
from mpicoll.calls.spec import sentinel
from mpicoll.verify.spec import Case, Symbolic, op_object
from mpicoll.verify.values import UNDEF, Ordered

UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


def with_both_specs():
    return [p for p, prim in DEFINED.items()
            if prim.spec is not None and prim.symbolic is not None and prim.count_kind]


def evaluate(mode, values, inputs, ufunc, dtype, sentinel):
    """The numbers symbolic ``values`` (an :class:`Ordered` encoding) stand for.

    Element e of ranks lo .. hi-1 combined in rank order is ``inputs[lo](e) (op) ...
    (op) inputs[hi-1](e)``; a receive buffer's original element is ``sentinel`` (the
    bench fills outputs with it); an element never written is None (MPI leaves it
    undefined: not compared).
    """
    v = np.asarray(values, dtype=np.int64)
    if np.any(v == UNDEF):
        return None
    out = np.full(v.size, sentinel, dtype=dtype)
    real = v >= 0
    e = v >> (2 * mode.b)
    lo, hi = (v >> mode.b) & mode.m, v & mode.m
    acc, started = np.zeros(v.size, dtype=dtype), np.zeros(v.size, dtype=bool)
    for q, inp in enumerate(inputs):
        take = real & (lo <= q) & (q < hi)
        if not take.any():
            continue
        x = inp(np.where(take, e, 0))
        acc = np.where(take & started, ufunc(acc, x, dtype=dtype), np.where(take, x, acc))
        started |= take
    assert started[real].all()
    out[real] = acc[real]
    return out


def cases(prim):
    """N = 1, 2, 3, 5 x sizes (empty, one element, not divisible by N, a few blocks) x roots."""
    rooted = DEFINED[prim].spec.rooted
    for n in (1, 2, 3, 5):
        for nbytes in (0, 4, 4 * n + 4, 4 * 7 * n + 12):
            for root in (range(n) if rooted else [0]):
                yield n, nbytes, root


def data_cases():
    """Every primitive with both specs in two dtypes; those with an op in two more ops."""
    for p in with_both_specs():
        yield from ((p, "int32", "sum"), (p, "float32", "sum"))
        if DEFINED[p].reduces:
            yield from ((p, "uint8", "max"), (p, "int64", "prod"))


@pytest.mark.parametrize("prim,dtype,opname", list(data_cases()))
def test_the_symbolic_spec_on_the_check_data_gives_the_check_output(prim, dtype, opname):
    primitive = DEFINED[prim]
    spec = primitive.spec
    compared = 0
    for n, nbytes, root in cases(prim):
        bench = every_rank(prim, n, nbytes, dtype, opname, root)
        inputs = [spec.input_fn(c) for c in bench]
        opk = "sum" if primitive.reduces else None
        case = Case(prim, "native", n, spec.call_count(bench[0]), root=root, op=opk)
        mode = Ordered(n)
        ranks = primitive.symbolic(Symbolic(case, mode, op_object(opk) if opk else None))
        assert len(ranks) == n
        for r, (c, rank) in enumerate(zip(bench, ranks, strict=True)):
            what = f"{prim} N={n} nbytes={nbytes} root={root} rank={r} {dtype} {opname}"
            inp, out = spec.io(c)
            ev = partial(evaluate, mode, inputs=inputs, ufunc=UFUNC[opname], dtype=c.dtype,
                         sentinel=sentinel(c.dtype))
            written = [i for i, role in enumerate(rank.roles) if role in ("out", "inout")]
            if inp is not None:
                # the symbolic input numbers elements as the bench's input buffer holds them
                first = next(i for i, role in enumerate(rank.roles) if role in ("in", "inout"))
                np.testing.assert_array_equal(ev(rank.init[first]),
                                              inputs[r](np.arange(inp.size)), err_msg=what)
            if out is None:
                continue
            # the buffer the bench checks: the one written, or the one read (bcast's root)
            i = written[-1] if written else 0
            assert len(rank.expect[i]) == out.size, what
            want = spec.output_fn(c)(np.arange(out.size, dtype=np.int64))
            got = ev(rank.expect[i])
            assert got is not None, what + ": the bench checks elements MPI leaves undefined"
            np.testing.assert_array_equal(got, want, err_msg=what)
            compared += out.size
    assert compared > 0
