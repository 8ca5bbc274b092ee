"""The seed's scripts as torch code (examples/torch/) and the DDP example, on "mpicoll".

Each seed script runs as its README line says (``mpirun -n 3 python
examples/torch/<name>.py``) and its printed tensors are parsed and compared
with the seed's results for N = 3 (the same expectations as the NumPy ports';
print order between ranks is free, as the seed says). The same scripts then
run over gloo (the backend name swapped in a copy, in one launch) and must
print the same values, apart from the scratch values gloo leaves in the
non-destination tensors of ``reduce``. The DDP example must end with the
parameters gloo gives. Skipped with the reason where torch is not installed.
"""
import os
import re
import sys

import numpy as np
import pytest
from launch import run_mpi
from test_demo import expected_walk, same_values

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

N = 3
TIMEOUT = 240
SEEDS = {"broadcast": "broadcast", "reduce": "reduce", "all_reduce": "all_reduce",
         "gather": "gather", "all_gather": "all_gather", "scatter": "scatter",
         "reduce_scatter": "ReduceScatter"}
_TENSOR = r"tensor\(\[[^\]]*\](?:, [a-z_]+=[^)]*)?\)"
_LINE = re.compile(rf"(Before|After) (\w+) on rank (\d+): (\[(?:{_TENSOR}(?:, )?)+\]|{_TENSOR})")


def tensor_values(text):
    """'tensor([1., 2.])' -> array; '[tensor(...), ...]' -> list of arrays (devices ignored)."""
    found = [np.array([float(v) for v in m.split(",") if v.strip()])
             for m in re.findall(r"tensor\(\[([^\]]*)\]", text)]
    return found if text.startswith("[") else found[0]


def parse(out):
    """{(when, what): {rank: value}} of the printed lines; lines of ranks may run into each
    other (the seed warns of it), so matches are found anywhere in the text.
    """
    got = {}
    for m in _LINE.finditer(out):
        got.setdefault((m.group(1), m.group(2)), {})[int(m.group(3))] = tensor_values(m.group(4))
    return got


def run_script(name):
    proc = run_mpi(N, [sys.executable, os.path.join("examples", "torch", f"{name}.py")],
                   timeout=TIMEOUT)
    assert proc.returncode == 0, (name, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


def check_seed(name, printed, gloo=False):
    label = SEEDS[name]
    want = expected_walk(N)
    for when in ("Before", "After"):
        got = printed.get((when, label), {})
        expect = want[(when, label)]
        assert sorted(got) == sorted(expect), (name, when, sorted(got))
        for r, value in expect.items():
            if gloo and name == "reduce" and when == "After" and r != 0:
                continue            # gloo leaves scratch values there; torch documents dst only
            assert same_values(got[r], value), (name, when, r, got[r], value)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_script_prints_the_seeds_results(name):
    out = run_script(name)
    check_seed(name, parse(out))
    if name == "scatter":
        lead = re.search(r"Rank 0: Tensor to scatter: (\[.*?\])\n", out)
        assert lead and same_values(tensor_values(lead.group(1)),
                                    [np.full(5, i + 1.0) for i in range(N)])


def test_barrier_script_waits_for_the_slowest():
    out = run_script("barrier")
    sleeps = re.findall(r"Rank (\d+) sleeps (\d+) seconds\.", out)
    assert sorted(int(r) for r, _ in sleeps) == list(range(N))
    deltas = {int(r): float(d) for r, d in
              re.findall(r"Rank (\d+) after barrier time delta: (\d+\.\d{4})", out)}
    assert sorted(deltas) == list(range(N))
    # Nobody leaves before the slowest rank (N - 1 seconds) has arrived.
    assert all(d >= N - 1 - 0.05 for d in deltas.values()), deltas


GLOO_DRIVER = r"""
import os, runpy, sys, io, contextlib
import torch.distributed as dist
import mpicoll.torch  # the MPI rendezvous: no MASTER_ADDR needed for gloo either
names = sys.argv[1:]
sys.path.insert(0, os.path.join("examples", "torch"))     # their _rankprint.py
for name in names:
    path = os.path.join("examples", "torch", name + ".py")
    code = open(path).read().replace("backend='mpicoll'", "backend='gloo'")
    assert "backend='gloo'" in code, path
    print(f"=== {name}", flush=True)
    exec(compile(code, path, "exec"), {"__name__": "__main__"})
    sys.stdout.flush()
    dist.destroy_process_group()
"""


@pytest.mark.full
def test_seed_scripts_print_what_gloo_prints():
    names = sorted(SEEDS)
    proc = run_mpi(N, [sys.executable, "-c", GLOO_DRIVER, *names], timeout=TIMEOUT)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    parts = re.split(r"=== (\w+)\n", proc.stdout)
    outputs = {}
    for i in range(1, len(parts) - 1, 2):
        outputs.setdefault(parts[i], "")
        outputs[parts[i]] += parts[i + 1]
    for name in names:
        check_seed(name, parse(outputs[name]), gloo=True)


# torch's gloo now and then aborts in its own teardown after the work is done (rank exits with
# "terminate called without an active exception" from a worker thread left joinable: measured
# 4 in 15 launches of the FSDP example at N = 3 without the final barrier, 1 in 15 with it).
# gloo is the reference here, not what is tested, so a run that failed with that message
# alone is launched again (at most REFERENCE_TRIES times in all); mpicoll's runs never are.
GLOO_TEARDOWN_ABORT = "terminate called without an active exception"
REFERENCE_TRIES = 3


def run_backend(backend, n, argv):
    """``argv`` launched on ``n`` ranks; gloo's teardown abort relaunched (see above)."""
    for _ in range(REFERENCE_TRIES if backend == "gloo" else 1):
        proc = run_mpi(n, argv, timeout=TIMEOUT)
        if proc.returncode == 0 or GLOO_TEARDOWN_ABORT not in proc.stderr:
            break
    return proc


def ddp_checksum(backend, n):
    proc = run_backend(backend, n, [sys.executable, os.path.join("examples", "torch", "ddp.py"),
                                    "--steps", "6", "--backend", backend])
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    losses = re.findall(r"rank (\d+) step (\d+) loss ([\d.]+)", proc.stdout)
    assert sorted({int(r) for r, _, _ in losses}) == list(range(n))
    assert len(losses) == 6 * n
    m = re.search(rf"{backend}: {n} ranks, 6 steps .* parameter checksum (\S+) (\S+)",
                  proc.stdout)
    assert m, proc.stdout[-2000:]
    return float(m.group(1)), float(m.group(2))


@pytest.mark.full
def test_ddp_example_ends_with_the_parameters_gloo_gives():
    ours = ddp_checksum("mpicoll", N)
    theirs = ddp_checksum("gloo", N)
    assert np.allclose(ours, theirs, rtol=1e-6), (ours, theirs)


@pytest.mark.full
@pytest.mark.parametrize("n", [2, 3])
def test_fsdp_example_trains_to_the_parameters_gloo_gives(n, tmp_path):
    """FSDP2 (fully_shard) and FSDP1 on CPU: the full parameters after training over
    "mpicoll" are gloo's (to float rounding: the reduce-scatters add in other orders).
    """
    torch = pytest.importorskip("torch")
    got = {}
    for backend in ("mpicoll", "gloo"):
        path = tmp_path / f"{backend}.pt"
        proc = run_backend(backend, n, [sys.executable,
                                        os.path.join("examples", "torch", "fsdp.py"),
                                        "--backend", backend, "--steps", "4", "--save", str(path)])
        assert proc.returncode == 0, (backend, proc.stdout[-3000:], proc.stderr[-3000:])
        for api in ("fsdp2", "fsdp1"):
            assert re.search(rf"{backend} {api}: {n} ranks, 4 steps; parameter checksum",
                             proc.stdout), proc.stdout[-2000:]
        got[backend] = torch.load(path)
    start = torch.cat([p.detach().reshape(-1).double() for p in
                       fsdp_example().model_for(32).parameters()])
    for api in ("fsdp2", "fsdp1"):
        ours, theirs = got["mpicoll"][api], got["gloo"][api]
        assert ours.shape == theirs.shape == start.shape
        assert not torch.equal(ours, start)                   # it trained
        assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6), \
            (api, (ours - theirs).abs().max())


def fsdp_example():
    """examples/torch/fsdp.py as a module (its initial model)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "fsdp_example", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                     "examples", "torch", "fsdp.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
