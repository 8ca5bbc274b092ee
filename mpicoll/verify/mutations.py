"""Mutation test: realistic faults seeded into copies of algorithms, each one caught.

A :class:`Mutation` edits the source of a registered algorithm (one exact
piece of text replaced: a wrong neighbour, one round too few, swapped
reduction operands, a forgotten root offset, a missing final copy, ...) or
its declared cost, compiles the copy beside the original (same module
globals, no decorator) and registers it under ``algorithm~mutation`` for
the time of the run. :func:`first_failure` then sweeps it N by N, from 1 up,
and returns the smallest case that fails: the fault is caught at that N.
Nothing of the original algorithm is changed.
"""
import ast
import inspect
import textwrap
from dataclasses import dataclass

from ._mpicoll import lookup, registry_table
from .check import verify
from .sweep import cases, sizes

__all__ = ["Mutation", "MUTATIONS", "mutant", "first_failure", "run_mutations",
           "report_mutations"]


@dataclass(frozen=True)
class Mutation:
    """A fault put into one algorithm, which the verifier must catch."""

    name: str
    primitive: str
    algorithm: str
    what: str                   # the fault, in words
    old: str = ""               # the text replaced in the algorithm's source
    new: str = ""
    cost: object = None         # a function Cost -> Cost: a wrong declaration instead

    @property
    def registered_as(self):
        """The name the mutated algorithm is registered under (``algorithm~name``)."""
        return f"{self.algorithm}~{self.name}"


def _wrong_ring_cost(cost):
    from mpicoll.coll.cost import Cost
    # the docstring's 2(N-1)α written as 2Nα: one step too many everywhere
    return Cost("2Nα + 2(N-1)/N·nβ + (N-1)/N·nγ", alpha=lambda k: 2 * k.N, beta=cost.beta,
                gamma=cost.gamma, exact=cost.exact)


MUTATIONS = (
    Mutation("wrong_neighbour", "allreduce", "ring",
             "receives from the right neighbour instead of the left",
             "right, left = (rank + 1) % size, (rank - 1) % size",
             "right, left = (rank + 1) % size, (rank + 1) % size"),
    Mutation("one_round_short", "allgather", "ring", "N-2 ring steps instead of N-1",
             "for s in range(size - 1):", "for s in range(size - 2):"),
    Mutation("swapped_operands", "reduce", "linear",
             "the accumulator combined before the lower rank's data",
             "ctx.reduce(lower, acc, acc)", "ctx.reduce(acc, lower, acc)"),
    Mutation("swapped_partner_operands", "allreduce", "recursive_doubling",
             "the lower partner's data reduced as the higher operand",
             "res = ctx.reduce(spare, acc, acc)", "res = ctx.reduce(acc, spare, acc)"),
    Mutation("no_root_offset", "scatter", "binomial",
             "children computed without adding the root back",
             "(rel + mask + root) % size)", "(rel + mask) % size)"),
    Mutation("missing_final_copy", "allgather", "bruck",
             "the second half of the final rotation left out",
             "ctx.copy(recvbuf[:rank * c], tmp[split_at:])", "pass"),
    Mutation("missing_result_copy", "reduce_scatter", "recursive_halving",
             "the finished block never copied to recvbuf",
             "ctx.copy(recvbuf, work[off[rank]:off[rank + 1]])", "pass"),
    Mutation("xor_pairing", "barrier", "dissemination",
             "a butterfly pairing (rank XOR 2^k), valid only at powers of two",
             "ctx.sendrecv(token, (rank + k) % size, token, (rank - k) % size)",
             "ctx.sendrecv(token, (rank ^ k) % size, token, (rank ^ k) % size)"),
    Mutation("send_then_receive", "allgather", "ring",
             "blocking send before the receive on every rank (needs eager buffering)",
             "ctx.sendrecv(recvbuf[sb * c:(sb + 1) * c], right, recvbuf[rb * c:(rb + 1) * c], "
             "left)",
             "ctx.send(recvbuf[sb * c:(sb + 1) * c], right); "
             "ctx.recv(recvbuf[rb * c:(rb + 1) * c], left)"),
    Mutation("wrong_fold_partner", "reduce", "rabenseifner",
             "a folded-out rank hands its data to rank - 1 instead of rank + 1",
             "ctx.send(sendbuf, rank + 1)\n        if rank == root:",
             "ctx.send(sendbuf, rank - 1)\n        if rank == root:"),
    Mutation("bruck_round_short", "alltoall", "bruck",
             "the last Bruck round dropped (k < N/2 instead of k < N)",
             "    while k < size:\n        # Blocks", "    while 2 * k < size:\n        # Blocks"),
    Mutation("forward_before_arrival", "bcast", "pipeline",
             "a segment forwarded before its receive completed",
             "ctx.wait(r)\n            if has_next:\n"
             "                sends.append(ctx.isend(s, nxt))",
             "if has_next:\n                sends.append(ctx.isend(s, nxt))\n            "
             "ctx.wait(r)"),
    Mutation("wrong_docstring_cost", "allreduce", "ring",
             "the declared latency 2Nα instead of 2(N-1)α", cost=_wrong_ring_cost),
)


def mutant(m):
    """The mutated copy of ``m``'s algorithm (not registered)."""
    fn = lookup(m.primitive, m.algorithm)
    if m.cost is not None:
        def copy(*args, **kw):
            return fn(*args, **kw)
        copy.__doc__ = fn.__doc__
        new = copy
        new.cost = m.cost(fn.cost)
    else:
        src = textwrap.dedent(inspect.getsource(fn))
        if m.old not in src:
            raise LookupError(f"mutation {m.name}: {m.primitive}/{m.algorithm} no longer "
                              f"contains {m.old!r}")
        src = src.replace(m.old, m.new, 1)
        tree = ast.parse(src)
        tree.body[0].decorator_list = []
        ns = dict(fn.__globals__)
        exec(compile(tree, f"<mutant {m.registered_as}>", "exec"), ns)
        new = ns[fn.__name__]
        new.cost = getattr(fn, "cost", None)
    new.primitive = m.primitive
    new.algorithm = m.registered_as
    new.commutative_only = getattr(fn, "commutative_only", False)
    for attr in ("check_layout",):
        if hasattr(fn, attr):
            setattr(new, attr, getattr(fn, attr))
    return new


def first_failure(primitive, algorithm, max_n=64, seed=0):
    """The smallest failing case of an algorithm (N by N, from 1 up), or None."""
    for N in sizes(max_n):
        fails = [r for r in (verify(c, seed) for c in cases(primitive, algorithm, N, seed,
                                                              min_n=N))
                 if r.status == "fail"]
        if fails:
            # a wrong result or a hang says more than the cost it also breaks
            return min(fails, key=lambda r: (r.failure.kind == "cost", r.case.count,
                                             r.case.root, str(r.case)))
    return None


def run_mutations(max_n=64, seed=0, mutations=MUTATIONS):
    """``[(mutation, smallest failing Result or None)]``: each mutant registered, swept, gone."""
    rows = []
    for m in mutations:
        table = registry_table(m.primitive)
        name = m.registered_as
        table[name] = mutant(m)
        try:
            rows.append((m, first_failure(m.primitive, name, max_n, seed)))
        finally:
            table.pop(name, None)
    return rows


def report_mutations(rows, out=print):
    """Print the mutation score table; True when every mutation was caught."""
    caught = sum(1 for _, r in rows if r is not None)
    out(f"mutation score: {caught}/{len(rows)} seeded faults caught")
    for m, r in rows:
        if r is None:
            out(f"  NOT CAUGHT  {m.primitive}/{m.algorithm} {m.name}: {m.what}")
            continue
        out(f"  caught at N={r.case.N:<3} {m.primitive}/{m.algorithm} {m.name}: {m.what}")
        out(f"      {r.failure.kind}: {r.case.text()}: {r.failure.text[:160]}")
    return caught == len(rows)
