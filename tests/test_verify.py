"""python -m mpicoll.verify: the symbolic executor, its checks, the declared costs, the sweep.

Serial (no MPI run): the plans of every rank are recorded and executed together
under the verifier's point-to-point model. Covered here:

- the CI subset of the sweep: every registered algorithm (node-aware variants
  included) at every N up to ``CI_MAX_N``, no failure, the declared cost
  checked exactly somewhere for every algorithm that declares one;
- the mutation test: every seeded fault caught, at the N recorded in
  benchmarks/verify.md;
- each check of the executor on a toy algorithm that breaks it (and passes
  without the fault): deadlock under rendezvous, unmatched message, size,
  race, overwrite of a final element, write to an input, operand order,
  barrier happens-before;
- the encodings of symbolic values;
- every algorithm's ``Cost:`` docstring line against its declaration (the
  text read as a formula), and regressions for the declarations the
  verifier found wrong;
- the command line (table, failure with its smallest case, ``--case``,
  ``--import``, an algorithm that cannot be recorded listed as unverified).
"""
import inspect
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import mpicoll
from mpicoll.coll.cost import Phases
from mpicoll.core.registry import _REGISTRY, lookup
from mpicoll.verify.__main__ import main as verify_main
from mpicoll.verify.check import verify
from mpicoll.verify.declared import call_of, cost_of
from mpicoll.verify.formula import terms
from mpicoll.verify.mutations import MUTATIONS, run_mutations
from mpicoll.verify.show import plan_lines
from mpicoll.verify.spec import REDUCING, ROOTED, Case
from mpicoll.verify.sweep import algorithms, sizes, sweep
from mpicoll.verify.values import Bits, Fingerprint, Ordered

#: The CI subset: every N up to here (the full sweep: python -m mpicoll.verify --max-n 1024).
CI_MAX_N = 12


@pytest.fixture
def toys():
    """Register toy algorithms for one test; remove them afterwards."""
    added = []

    def add(primitive, name, fn, **kw):
        mpicoll.register(primitive, name, **kw)(fn)
        added.append((primitive, name))
        return fn
    yield add
    for p, n in added:
        _REGISTRY[p].pop(n, None)


# -- the CI subset and the mutation test ---------------------------------------------------

def test_ci_subset_of_the_sweep_passes():
    summary = sweep(max_n=CI_MAX_N, jobs=1)
    fails = [f"{r.case}: {r.failure}" for r in summary.failures]
    assert not fails, "\n".join(fails[:10])
    swept = {(r.case.primitive, r.case.algorithm) for r in summary.results}
    assert swept == set(algorithms())
    assert {r.case.N for r in summary.results} == set(range(1, CI_MAX_N + 1))
    # Unverified: exactly the algorithms that read peers' memory (shm, hierarchical's
    # intra=shm), which record no plan, and each says so.
    unverified = {(r.case.primitive, r.case.algorithm): r.reason for r in summary.results
                  if r.status == "unverified"}
    reads_memory = {(p, a) for p, a in swept if getattr(lookup(p, a), "host_only", False)}
    assert set(unverified) == reads_memory and reads_memory
    assert all("no plan" in why for why in unverified.values()), unverified
    for p, a in swept:
        if cost_of(p, a) is None or (p, a) in reads_memory:
            continue
        checked = [r for r in summary.results if (r.case.primitive, r.case.algorithm) == (p, a)
                   and r.cost == "checked"]
        assert checked, f"{p}/{a}: the declared cost was never exact in the CI subset"


#: The N at which each seeded fault is first caught (benchmarks/verify.md records them).
CAUGHT_AT = {"wrong_neighbour": 3, "one_round_short": 2, "swapped_operands": 2,
             "swapped_partner_operands": 2, "no_root_offset": 2, "missing_final_copy": 2,
             "missing_result_copy": 1, "xor_pairing": 3, "send_then_receive": 2,
             "wrong_fold_partner": 3, "bruck_round_short": 2, "forward_before_arrival": 3,
             "wrong_docstring_cost": 1}


def test_every_seeded_fault_is_caught():
    assert len(MUTATIONS) >= 10
    rows = run_mutations(max_n=16)
    got = {m.name: (None if r is None else r.case.N) for m, r in rows}
    assert got == CAUGHT_AT
    kinds = {m.name: r.failure.kind for m, r in rows}
    assert kinds["send_then_receive"] == "deadlock"
    assert kinds["swapped_operands"] == "operands"
    assert kinds["missing_final_copy"] == "result"
    assert kinds["wrong_docstring_cost"] == "cost"
    assert kinds["forward_before_arrival"] == "race"
    # the mutants were registered for the run only
    assert all(m.registered_as not in _REGISTRY[m.primitive] for m in MUTATIONS)


# -- the executor's checks, each on a toy that breaks it ------------------------------------

def _exchange(ctx, sendbuf, recvbuf, op, send_first):
    """A toy allreduce for N = 2: swap with the partner, reduce in rank order."""
    ctx.copy(recvbuf, sendbuf)
    other = 1 - ctx.rank
    tmp = ctx.scratch(recvbuf.size)
    if send_first:
        ctx.send(recvbuf, other)
        ctx.recv(tmp, other)
    else:
        ctx.sendrecv(recvbuf, other, tmp, other)
    if ctx.rank == 0:           # mine is the lower operand; a user op writes the higher
        ctx.copy(recvbuf, ctx.reduce(recvbuf, tmp, recvbuf))
    else:
        ctx.reduce(tmp, recvbuf, recvbuf)


def test_deadlock_under_rendezvous_names_the_cycle(toys):
    toys("allreduce", "t_send_first", lambda c, s, r, op: _exchange(c, s, r, op, True))
    toys("allreduce", "t_sendrecv", lambda c, s, r, op: _exchange(c, s, r, op, False))
    ok = verify(Case("allreduce", "t_sendrecv", 2, 3, op="noncomm"))
    assert ok.status == "pass", ok.failure
    bad = verify(Case("allreduce", "t_send_first", 2, 3, op="noncomm"))
    assert bad.failure.kind == "deadlock"
    assert "[0, 1]" in bad.failure.text and "rank 0 step 1 (send" in bad.failure.text
    assert "rank 1 step 1 (send" in bad.failure.text
    # with the messages sent eagerly (a 24-byte message under a 64-byte limit) it completes
    eager = verify(Case("allreduce", "t_send_first", 2, 3, op="noncomm", eager=64))
    assert eager.status == "pass", eager.failure


def test_unmatched_message_and_size_mismatch(toys):
    def extra(ctx, buf, root):
        if ctx.rank == root:
            for r in range(ctx.size):
                if r != root:
                    ctx.send(buf, r)
            ctx.send(buf, (root + 1) % ctx.size)        # one message too many
        else:
            ctx.recv(buf, root)

    def short(ctx, buf, root):
        if ctx.rank == root:
            for r in range(ctx.size):
                if r != root:
                    ctx.send(buf[1:], r)
        else:
            ctx.recv(buf, root)
    toys("bcast", "t_extra", extra)
    toys("bcast", "t_short", short)
    r = verify(Case("bcast", "t_extra", 3, 2, root=1))
    assert r.failure.kind == "unmatched" and "rank 2, which has finished" in r.failure.text
    r = verify(Case("bcast", "t_short", 3, 2, root=0))
    assert r.failure.kind == "size" and "sends 1 elements to a receive of 2" in r.failure.text


def test_race_on_a_pending_receive(toys):
    def early(ctx, sendbuf, recvbuf, op):
        ctx.copy(recvbuf, sendbuf)
        tmp = ctx.scratch(recvbuf.size)
        q = ctx.irecv(tmp, (ctx.rank - 1) % ctx.size)
        ctx.send(recvbuf, (ctx.rank + 1) % ctx.size)
        ctx.reduce(tmp, recvbuf, recvbuf)       # reads tmp before the wait
        ctx.wait(q)
    toys("allreduce", "t_early", early)
    r = verify(Case("allreduce", "t_early", 3, 2, op="sum"))
    assert r.failure.kind == "race"
    assert "reads buf2[0:2], the buffer of the pending receive" in r.failure.text


def test_overwriting_a_final_element_or_an_input(toys):
    ring = mpicoll.algorithm_info("allreduce", "recursive_doubling")

    def clobber(ctx, sendbuf, recvbuf, op):
        ring(ctx, sendbuf, recvbuf, op)
        ctx.copy(recvbuf, sendbuf)              # the result overwritten ...
        ring(ctx, sendbuf, recvbuf, op)         # ... and recomputed: the end is right

    def scribble(ctx, sendbuf, recvbuf, op):
        ring(ctx, sendbuf, recvbuf, op)
        ctx.copy(sendbuf, recvbuf)              # MPI's sendbuf is read-only
    toys("allreduce", "t_clobber", clobber)
    toys("allreduce", "t_scribble", scribble)
    r = verify(Case("allreduce", "t_clobber", 4, 3, op="sum"))
    assert r.failure.kind == "overwrite"
    assert "already held its final value" in r.failure.text
    r = verify(Case("allreduce", "t_scribble", 4, 3, op="noncomm"))
    assert r.failure.kind == "overwrite" and "read-only input" in r.failure.text


def test_operands_out_of_rank_order_and_a_missing_contribution(toys):
    def backwards(ctx, sendbuf, recvbuf, op, root):
        if ctx.rank != root:
            ctx.send(sendbuf, root)
            return
        tmp = ctx.scratch(sendbuf.size)
        ctx.copy(recvbuf, sendbuf)
        for i in range(ctx.size):
            if i != root:
                ctx.recv(tmp, i)
                ctx.reduce(recvbuf, tmp, recvbuf)   # accumulator first: order of arrival

    def forgetful(ctx, sendbuf, recvbuf, op, root):
        if ctx.rank != root and ctx.rank != ctx.size - 1:
            ctx.send(sendbuf, root)
            return
        if ctx.rank != root:
            return                                  # the last rank forgets to send
        tmp = ctx.scratch(sendbuf.size)
        ctx.copy(recvbuf, sendbuf)
        for i in range(ctx.size):
            if i not in (root, ctx.size - 1):
                ctx.recv(tmp, i)
                ctx.reduce(tmp, recvbuf, recvbuf)
    toys("reduce", "t_backwards", backwards)
    toys("reduce", "t_forgetful", forgetful, commutative_only=True)
    # a commutative op does not care about the order ...
    assert verify(Case("reduce", "t_backwards", 4, 2, root=0, op="sum")).status == "pass"
    # ... a non-commutative one does: the root's own data cannot come before rank 0's
    r = verify(Case("reduce", "t_backwards", 4, 2, root=2, op="noncomm"))
    assert r.failure.kind == "operands"
    assert "combines element 0 of rank 2 (lower) with element 0 of rank 0 (higher)" in \
        r.failure.text
    r = verify(Case("reduce", "t_forgetful", 4, 2, root=0, op="sum"))
    assert r.failure.kind == "result" and "ranks {0, 1, 2}" in r.failure.text
    # above 32 ranks the fingerprint encoding sees the same fault in the result
    r = verify(Case("reduce", "t_forgetful", 40, 2, root=0, op="sum"))
    assert r.failure.kind == "result" and "fingerprint" in r.failure.text


def test_a_barrier_that_does_not_wait_is_refused(toys):
    def release_only(ctx):
        token = ctx.scratch(0)
        if ctx.rank == 0:
            for r in range(1, ctx.size):
                ctx.send(token, r)              # releases before hearing from anyone
        else:
            ctx.recv(token, 0)
    toys("barrier", "t_release_only", release_only)
    assert verify(Case("barrier", "t_release_only", 1, 0)).status == "pass"
    r = verify(Case("barrier", "t_release_only", 3, 0))
    assert r.failure.kind == "barrier" and "rank 0 may leave before rank(s) [1, 2]" in \
        r.failure.text


# -- symbolic values ---------------------------------------------------------------------------

def test_ordered_values_combine_adjacent_ranges_lower_first():
    v = Ordered(8)
    a = v.reduction(0, 3, [5])              # element 5 of ranks 0..2
    b = v.reduction(3, 5, [5])              # element 5 of ranks 3..4
    res, bad = v.combine(a, b)
    assert bad == -1 and res[0] == v.reduction(0, 5, [5])[0]
    assert v.combine(b, a)[0] is None                              # higher first
    assert v.combine(a, v.reduction(4, 5, [5]))[0] is None         # rank 3 skipped
    assert v.combine(a, v.reduction(3, 5, [6]))[0] is None         # another element
    assert v.combine(a, v.undef(1))[0] is None
    assert v.describe(res[0]) == "element 5 of ranks 0..4 combined in rank order"


def test_bits_refuse_a_contribution_counted_twice():
    v = Bits(5)
    a, b = v.inp(1, [2]), v.inp(3, [2])
    res, _ = v.combine(a, b)
    assert v.describe(res[0]) == "element 2 of ranks {1, 3}"
    assert v.combine(res, a)[0] is None                            # rank 1 twice
    assert v.combine(b, a)[0] is not None                          # any order is fine


def test_fingerprints_tell_multisets_apart():
    v = Fingerprint(100, seed=3)
    idx = np.arange(4)
    total = v.reduction(0, 100, idx)
    acc = v.inp(99, idx)
    for r in range(98, -1, -1):                                    # any order
        acc, _ = v.combine(v.inp(r, idx), acc)
    assert np.array_equal(acc, total)
    twice = v.combine(v.reduction(0, 99, idx), v.inp(0, idx))[0]   # rank 0 twice, 99 missing
    assert not np.array_equal(twice, total)
    assert not np.array_equal(v.reduction(0, 100, idx + 1), total)  # another element


# -- declared costs -------------------------------------------------------------------------

def _builtin():
    """The built-in algorithms with a plan: not native, not the shm ones (their cost is in
    reads of peers' memory, :class:`mpicoll.coll.shm.Reads`, which tests/mpi/test_shm.py
    checks against the reads counted at run time).
    """
    for p in mpicoll.PRIMITIVES:
        for a in mpicoll.algorithms(p):
            fn = mpicoll.algorithm_info(p, a)
            if a != "native" and fn.__module__.startswith("mpicoll.coll.") \
                    and getattr(fn, "reads", None) is None:
                yield p, a, fn


def test_every_builtin_algorithm_declares_its_cost_and_its_docstring_states_it():
    for p, a, fn in _builtin():
        cost = getattr(fn, "cost", None)
        assert cost is not None, f"{p}/{a} declares no cost"
        doc = " ".join(inspect.getdoc(fn).split())
        at = doc.find("Cost:")
        assert at >= 0, f"{p}/{a}: no Cost: line"
        assert " ".join(cost.text.split()) in doc[at:], f"{p}/{a}: {cost.text!r} not in its Cost:"


def test_each_cost_text_means_what_its_functions_compute():
    """The docstring formula read as a formula equals the declared functions where exact."""
    checked = 0
    for p, a, fn in _builtin():
        cost = fn.cost
        if isinstance(cost, Phases):        # the phases' own formulas are checked here
            continue
        for N in (1, 2, 3, 4, 5, 7, 8, 12, 16, 31, 32, 64):
            for n in (0, 1, N - 1, N, 3 * N + 1, 8 * N):
                for root in ((0, N - 1) if p in ROOTED else (0,)):
                    for op in (("sum", "noncomm") if p in REDUCING else (None,)):
                        for itemsize in (8, 1 << 15):
                            k = call_of(Case(p, a, N, max(n, 0), root=root, op=op,
                                             itemsize=itemsize))
                            if cost.why_inexact(k):
                                continue
                            got, want = terms(cost, k), cost.terms(k)
                            assert got == pytest.approx(want), (p, a, k, cost.text)
                            checked += 1
    assert checked > 5000


def test_regressions_for_the_declared_costs_the_verifier_corrected():
    """Critical paths the old docstrings stated wrongly, at the N that exposed them."""
    # reduce_scatterv at N = 4, 8 elements: the scatterv sends (N-1)/N·n, not n
    r = verify(Case("reduce_scatter", "reduce_scatterv", 4, 8, op="sum"))
    assert r.cost == "checked" and r.path == (2 + 3, 2 * 8 + 6, 2 * 8)
    # the binomial scan at N = 4: 3 steps (up-sweep 2, down-sweep 1), not 2⌈log2 N⌉ = 4
    r = verify(Case("scan", "binomial", 4, 5, op="noncomm"))
    assert r.cost == "checked" and r.path == (3, 15, 10)
    # the doubling scan at N = 4: exactly 2⌈log2 N⌉n reduced on the path ("up to" before)
    r = verify(Case("scan", "recursive_doubling", 4, 5, op="sum"))
    assert r.cost == "checked" and r.path == (2, 10, 20)
    # linear alltoallv at N = 3, blocks of 2: max(s, r) counts the others' blocks only
    r = verify(Case("alltoallv", "linear", 3, 2))
    assert r.cost == "checked" and r.path == (2, 4, 0) and r.traffic == (4, 8, 0)
    # Rabenseifner's reduce at N = 3 with root 0: the root is a folded rank
    r = verify(Case("reduce", "rabenseifner", 3, 4, root=0, op="sum"))
    assert r.cost == "checked" and r.path == (2 + 1 + 1, 4 + 4 + 4, 2 + 4)


def test_the_bench_model_reads_the_declarations():
    from mpicoll.bench.formula_prices import COSTS, cost
    from mpicoll.coll.cost import Call
    decl = mpicoll.algorithm_info("allreduce", "rabenseifner").cost
    for N in (3, 64, 1000, 1024):
        got = cost("allreduce", "rabenseifner", N, 4096, 2e-6, 1e-10, 2e-10)
        assert got == decl.time(Call(N, 4096, itemsize=1), 2e-6, 1e-10, 2e-10)
    assert set(COSTS["reduce_scatter"]) == {"ring", "recursive_halving", "pairwise",
                                             "reduce_scatterv"}


# -- the command line and the gallery ---------------------------------------------------------

BAD = '''
from mpicoll import register


@register("allgather", "t_off_by_one")
def allgather_off_by_one(ctx, sendbuf, recvbuf):
    """Test only: the ring, one step short from N = 4 on."""
    size, rank, c = ctx.size, ctx.rank, sendbuf.size
    ctx.copy(recvbuf[rank * c:(rank + 1) * c], sendbuf)
    right, left = (rank + 1) % size, (rank - 1) % size
    for s in range(size - 1 if size < 4 else size - 2):
        sb, rb = (rank - s) % size, (rank - s - 1) % size
        ctx.sendrecv(recvbuf[sb * c:(sb + 1) * c], right, recvbuf[rb * c:(rb + 1) * c], left)


@register("allgather", "t_direct")
def allgather_direct(ctx, sendbuf, recvbuf):
    """Test only: touches an element itself, so no plan can record it."""
    recvbuf[0] = 0
'''


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mpicoll.verify", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def test_command_line_sweeps_reports_and_reruns_the_smallest_case(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    ok = _cli("--primitive", "allgather", "--algorithm", "ring", "--max-n", "9", "--jobs", "1")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "allgather/ring" in ok.stdout and "0 failed" in ok.stdout
    bad = _cli("--primitive", "allgather", "--import", "bad.py", "--max-n", "6", "--jobs", "1",
               cwd=tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "allgather/t_off_by_one" in bad.stdout and "FAIL N=4" in bad.stdout
    assert "unverified: allgather/t_direct: not recordable as a plan" in bad.stdout
    line = [x for x in bad.stdout.splitlines() if "--case" in x][0]
    case = line.split('--case "', 1)[1].rstrip('"')
    assert case.startswith("allgather/t_off_by_one N=4 ")
    again = _cli("--import", "bad.py", "--case", case, cwd=tmp_path)
    assert again.returncode == 1 and "status: fail" in again.stdout


WRONG_BINOMIAL = '''
from mpicoll import register


@register("bcast", "t_wrong_binomial")
def bcast_wrong_binomial(ctx, buf, root):
    """Test only: the binomial tree with its child test ``<=`` where it must be ``<``."""
    size, rel = ctx.size, (ctx.rank - root) % ctx.size
    mask = 1
    while mask < size:
        if rel & mask:
            ctx.recv(buf, (rel - mask + root) % size)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if rel + mask <= size:
            ctx.send(buf, (rel + mask + root) % size)
        mask >>= 1
'''


def test_a_failing_plug_in_ends_a_parallel_sweep_with_its_smallest_case(tmp_path):
    # several worker processes send the failures back to the parent (they once could not be
    # unpickled there, and the sweep hung): the run must end, within the timeout, with exit 1
    code, out, err = _verify_cli(tmp_path, WRONG_BINOMIAL, "--max-n", "8", "--primitive",
                                 "bcast", "--algorithm", "t_wrong_binomial", "--jobs", "3")
    assert code == 1, out + err
    # N = 1 and 2 have no rank with rel + mask == size; from N = 3 a rank sends to the root
    assert "bcast/t_wrong_binomial" in out and "FAIL N=3" in out
    line = [x for x in out.splitlines() if "--case" in x][0]
    assert '--case "bcast/t_wrong_binomial N=3 count=0 root=0"' in line
    assert "unmatched: rank 2" in out
    # stderr is a pipe here: progress as plain lines, the last one the total
    progress = [x for x in err.splitlines() if x.startswith("verify: ")]
    assert progress and "\r" not in err
    done, total = progress[-1].split()[1].split("/")
    assert done == total and int(total) >= 50       # enough cases for the worker pool


ENDING_PLUG_IN = '''
import os
import sys

from mpicoll import register


@register("bcast", "t_ending_linear")
def bcast_ending_linear(ctx, buf, root):
    """Test only: a linear bcast whose code ends its process at N = 6 ({how})."""
    if ctx.size == 6:
        {how}
    if ctx.rank == root:
        for peer in range(ctx.size):
            if peer != root:
                ctx.send(buf, peer)
    else:
        ctx.recv(buf, root)
'''


def _verify_cli(tmp_path, plug_in, *args, timeout=120):
    (tmp_path / "plug.py").write_text(plug_in)
    cmd = [sys.executable, "-m", "mpicoll.verify", "--import", "plug.py", *args]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)     # the workers too
        out, err = proc.communicate()
        pytest.fail(f"the sweep did not end within {timeout} s:\n{out}\n{err}")
    return proc.returncode, out, err


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_a_plug_in_that_calls_sys_exit_fails_its_case(tmp_path, jobs):
    # SystemExit is no Exception: it once ended the serial sweep with no report and hung a
    # parallel one (its worker died with the case)
    code, out, err = _verify_cli(
        tmp_path, ENDING_PLUG_IN.format(how="sys.exit(3)"), "--max-n", "8", "--primitive",
        "bcast", "--algorithm", "t_ending_linear", "--jobs", jobs)
    assert code == 1, out + err
    assert "bcast/t_ending_linear" in out and "FAIL N=6" in out
    assert "the check raised SystemExit: 3" in out
    total = [x for x in err.splitlines() if x.startswith("verify: ")][-1].split()[1]
    assert int(total.split("/")[1]) >= 50       # enough cases for the worker pool at --jobs 3


def test_a_plug_in_that_ends_its_worker_ends_the_sweep(tmp_path):
    code, out, err = _verify_cli(
        tmp_path, ENDING_PLUG_IN.format(how="os._exit(3)"), "--max-n", "8", "--primitive",
        "bcast", "--algorithm", "t_ending_linear", "--jobs", "3")
    assert code == 1, out + err
    assert "case 'bcast/t_ending_linear N=6" in err and "ends the process" in err


def test_the_sweep_takes_no_fewer_than_one_job():
    with pytest.raises(SystemExit) as exc:
        verify_main(["--jobs", "0"])
    assert exc.value.code == 2


def test_a_verified_plan_drawn_step_by_step():
    lines = plan_lines(Case("allgather", "ring", 3, 1))
    assert lines[0].split()[:4] == ["step", "rank", "0", "rank"]
    rows = [x.split() for x in lines[2:]]
    assert [r[0] for r in rows] == ["1", "2"]
    assert rows[0][1:] == [">1:1", "<2:1", ">2:1", "<0:1", ">0:1", "<1:1"]


def test_register_is_public_and_the_sizes_reach_1024():
    assert "register" in mpicoll.__all__
    from mpicoll.core.registry import register
    assert mpicoll.register is register
    assert sizes(1024) == list(range(1, 66)) + [127, 128, 129, 255, 256, 257, 511, 512, 513,
                                                1023, 1024]


def test_the_sweep_reads_each_primitive_s_kind_from_the_primitive():
    """The verifier's kinds of primitive are the primitives' own declarations.

    Reference: the MPI standard's collectives (4.1, ch. 6): which take a root, an op,
    per-rank counts and displacements, no data; and the list the sweep was written with for
    the in-place forms the faces hand to the algorithms as such.
    """
    from mpicoll.verify.spec import COUNTED, DATALESS, IN_PLACE, V_PRIMITIVES, VECTOR
    builtin = set(mpicoll.PRIMITIVES)
    assert set(ROOTED) & builtin == {"bcast", "reduce", "gather", "scatter", "gatherv",
                                     "scatterv"}
    assert set(REDUCING) & builtin == {"reduce", "allreduce", "reduce_scatter", "scan",
                                       "exscan"}
    assert set(V_PRIMITIVES) & builtin == {"gatherv", "scatterv", "allgatherv", "alltoallv"}
    assert set(COUNTED) & builtin == set(V_PRIMITIVES) & builtin | {"reduce_scatter"}
    assert set(VECTOR) & builtin == {"bcast", "reduce", "allreduce", "reduce_scatter", "scan",
                                     "exscan"}
    assert set(DATALESS) & builtin == {"barrier"}
    assert set(IN_PLACE) & builtin == {"allreduce", "gather", "allgather", "gatherv",
                                       "scatterv", "allgatherv", "scan", "exscan"}
    assert "no_such_primitive" not in ROOTED
