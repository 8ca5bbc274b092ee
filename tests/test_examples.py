"""Run every script in examples/ under mpiexec at N = 1..5 and check its printed results, parsed.

Each example is the seed's script ported to ``mpicoll.distributed``; its
"Before"/"After" lines (printed in rank order through rank 0) are parsed and
compared with NumPy expectations for that N, like the demo's.
"""
import glob
import os
import re
import sys

import numpy as np
import pytest
from launch import ROOT, run_mpi, timed_out
from test_demo import (
    FAKE_GPU,
    by_rank,
    expected_walk,
    parse_lead,
    parse_printed,
    same_values,
    split,
)

import mpicoll.gpu

TIMEOUT = 120
SIZES = [1, 2, 3, 4, 5]
SCALE = 0.1        # barrier.py's sleep scale here (the seed's is 1)

# example -> (label in its printed lines, whether it prints an "After" line per rank)
SEED_LABELS = {
    "broadcast": "broadcast", "reduce": "reduce", "all_reduce": "all_reduce", "gather": "gather",
    "all_gather": "all_gather", "scatter": "scatter", "reduce_scatter": "ReduceScatter",
    "ring_allreduce": "ring all_reduce",
}
EXAMPLES = sorted(os.path.splitext(os.path.basename(p))[0]
                  for p in glob.glob(os.path.join(ROOT, "examples", "*.py"))
                  if not os.path.basename(p).startswith("_"))


def test_every_seed_primitive_has_an_example():
    assert set(EXAMPLES) == set(SEED_LABELS) | {"barrier"}


def run_example(name, n, *args):
    proc = run_mpi(n, [sys.executable, os.path.join("examples", f"{name}.py"), *args],
                   timeout=TIMEOUT)
    assert proc.returncode == 0, (
        f"{name} at N={n}: exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", sorted(SEED_LABELS))
def test_example(name, n):
    check_example(name, n, run_example(name, n))


def check_example(name, n, out):
    """The seed's printed results at N = n, parsed."""
    label = SEED_LABELS[name]
    want = expected_walk(n)
    found = parse_printed(out)
    assert {what for _, what, _, _ in found} == {label}, found
    for when in ("Before", "After"):
        got = by_rank(found, when, label)
        assert sorted(got) == sorted(want[(when, label)]), (when, sorted(got))
        for r, value in want[(when, label)].items():
            assert same_values(got[r], value), (name, when, r, got[r], value)
    # All Before lines come before any After line (the seed's two blocks).
    whens = [w for w, _, _, _ in found]
    assert whens == sorted(whens, key=lambda w: w == "After")
    if name == "scatter":
        assert same_values(parse_lead(out), [np.full(5, i + 1.0) for i in range(n)])
    if name == "ring_allreduce":
        sent = re.findall(
            r"^Rank (\d+) sent (\d+) elements in (\d+) messages \(2\(N-1\)K/N = ([\d.]+)", out,
            re.M)
        assert [int(s[0]) for s in sent] == list(range(n))
        c = split(5, n)
        for r, elems, msgs, formula in sent:
            r = int(r)
            assert int(msgs) == 2 * (n - 1)
            assert int(elems) == (0 if n == 1 else 10 - c[(r + 1) % n] - c[(r + 2) % n])
            assert abs(float(formula) - 2 * (n - 1) * 5 / n) < 1e-3
        assert sum(int(s[1]) for s in sent) == 2 * (n - 1) * 5


def test_reduce_scatter_prints_the_seeds_numbers():
    after = by_rank(parse_printed(run_example("reduce_scatter", 3)), "After", "ReduceScatter")
    assert [after[r].tolist() for r in range(3)] == [[6, 12], [14, 56], [36, 288]]


@pytest.mark.parametrize("n", SIZES)
def test_barrier_example(n):
    out = run_example("barrier", n, str(SCALE))
    sleeps = re.findall(r"^Rank (\d+) sleeps ([\d.]+) seconds\.$", out, re.M)
    assert [int(r) for r, _ in sleeps] == list(range(n))
    assert all(abs(float(s) - int(r) * SCALE) < 1e-9 for r, s in sleeps)
    deltas = re.findall(r"^Rank (\d+) after barrier time delta: (\d+\.\d{4})$", out, re.M)
    assert [int(r) for r, _ in deltas] == list(range(n))
    assert out.index("sleeps") < out.index("after barrier")


# -- --device gpu ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["all_reduce", "barrier"])
def test_example_device_gpu_without_gpu_fails_clearly(name):
    if mpicoll.gpu.cupy_status()[0]:
        pytest.skip("this machine has a usable GPU")
    proc = run_mpi(2, [sys.executable, os.path.join("examples", f"{name}.py"), "--device", "gpu"],
                   timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, (proc.returncode, out)
    assert not timed_out(proc) and "Traceback" not in out, out
    lines = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert lines == [f"{name}.py: error: --device gpu: no usable GPU on any of the 2 ranks: "
                     f"{mpicoll.gpu.cupy_status()[1]}"], proc.stderr
    assert "Before" not in proc.stdout and "sleeps" not in proc.stdout


def test_example_help_mentions_device():
    proc = run_mpi(2, [sys.executable, os.path.join("examples", "broadcast.py"), "--help"],
                   timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("usage:") == 1 and "--device {cpu,gpu}" in proc.stdout


def run_fake_gpu_example(name, n, *args):
    """The example with ``cupy`` replaced by the CPU stand-in of tests/test_demo.py."""
    path = os.path.join(ROOT, "examples", f"{name}.py")
    code = (FAKE_GPU + f"import runpy\nsys.path.insert(0, {os.path.dirname(path)!r})\n"
            f"sys.argv = [{path!r}] + {list(args)!r}\n"
            f"runpy.run_path({path!r}, run_name='__main__')\n")
    proc = run_mpi(n, [sys.executable, "-c", code], timeout=TIMEOUT)
    assert proc.returncode == 0, (
        f"{name} at N={n}: exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


@pytest.mark.parametrize("name", sorted(SEED_LABELS))
def test_example_device_gpu_on_a_stand_in_device(name):
    # Tensors created on the (fake) device, printed as on the CPU: the same parsed results.
    check_example(name, 3, run_fake_gpu_example(name, 3, "--device", "gpu"))


def test_barrier_example_device_gpu_on_a_stand_in_device():
    out = run_fake_gpu_example("barrier", 2, str(SCALE), "--device", "gpu")
    assert re.findall(r"^Rank (\d+) after barrier time delta", out, re.M) == ["0", "1"]
