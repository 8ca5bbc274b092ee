"""scripts/gpu_proof.sh on a machine without a GPU: it must stop at once (exit 3), install nothing.

Its GPU steps cannot run here; their bookkeeping can: with a stand-in ``nvidia-smi`` that lists
a GPU and ``--no-install`` on this venv, every GPU step fails (no CuPy), the script carries on,
writes RUN.md with each command and exit code, and exits 1.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

import mpicoll.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_proof.sh")


def run(*args, env=None, timeout=60):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(["bash", SCRIPT, *args], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def fake_smi(tmp_path, listing):
    path = tmp_path / "nvidia-smi"
    path.write_text(f"#!/bin/sh\nif [ \"$1\" = \"-L\" ]; then printf '{listing}'; else echo table; fi\n")
    path.chmod(0o755)
    return str(path)


def test_script_parses_and_passes_shellcheck():
    r = subprocess.run(["bash", "-n", SCRIPT], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", "-x", SCRIPT], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stdout + r.stderr


def test_help_and_usage_errors():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    for word in ("--quick", "--no-install", "--out", "tests/mpi/test_device.py", "--xp cupy", "RUN.md"):
        assert word in r.stdout, word
    r = run("--bogus")
    assert r.returncode == 2 and "unknown argument '--bogus'" in r.stderr, r.stderr


@pytest.mark.parametrize("smi", ["missing", "lists no GPU"])
def test_without_a_gpu_it_exits_3_before_installing_anything(tmp_path, smi):
    venv, out = tmp_path / "venv", tmp_path / "out"
    cmd = str(tmp_path / "no-such-nvidia-smi") if smi == "missing" else fake_smi(tmp_path, "")
    r = run("--out", str(out), env={"MPICOLL_NVIDIA_SMI": cmd, "MPICOLL_GPU_VENV": str(venv)})
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    why = "has no" if smi == "missing" else "finds none on"
    assert re.match(rf"gpu_proof\.sh: needs an NVIDIA GPU, but .*{why}.*: nothing installed, nothing run$",
                    lines[0]), lines
    assert not venv.exists() and not out.exists()


def test_the_real_nvidia_smi_check_here():
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    r = run()
    assert r.returncode == 3 and "needs an NVIDIA GPU" in r.stderr, (r.returncode, r.stderr)


def test_failing_steps_are_recorded_and_the_run_goes_on(tmp_path):
    if mpicoll.gpu.cupy_status()[0]:
        pytest.skip("CuPy works here: the GPU steps would run for real")
    if not os.path.exists(os.path.join(sys.prefix, "bin", "mpiexec")):
        pytest.skip(f"no mpiexec in {sys.prefix}/bin (the script runs the venv's own)")
    out = tmp_path / "out"
    r = run("--quick", "--no-install", "--out", str(out), timeout=400,
            env={"MPICOLL_NVIDIA_SMI": fake_smi(tmp_path, "GPU 0: Stand-in GPU (UUID: GPU-0)\\n"),
                 "MPICOLL_GPU_VENV": sys.prefix, "MPICOLL_STEP_TIMEOUT": "60"})
    assert r.returncode == 1, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    md = (out / "RUN.md").read_text()
    steps = dict(re.findall(r"^\| (\S+) \| (\d+)(?: \*\*FAILED\*\*)? \| [\d.]+ \|", md, re.M))
    # Every step ran, in spite of the failures before it; exit codes as each command gave them.
    assert steps["nvidia-smi"] == "0" and steps["versions"] == "1", steps
    for name in ("test-device-n1", "test-device-n2", "bench-allreduce-n2", "bench-allgather-n2",
                 "bench-bcast-n2"):
        assert steps[name] != "0", (name, steps)
    assert steps["demo-gpu-n2"] == "3" and steps["example-all_reduce-gpu-n2"] == "3", steps
    assert "MPICOLL_TEST_XP=cupy" in md and "python -m mpi4py -m pytest --with-mpi -q " \
        "tests/mpi/test_device.py" in md.replace(f"{sys.prefix}/bin/", "")
    assert re.search(r"-m mpicoll\.bench allreduce --xp cupy --algorithm [a-z_,]*native", md)
    assert "| device path | **staged** (decided by MPIX_Query_cuda_support) |" in md
    assert "- GPU 0: Stand-in GPU" in md and "UUID" not in md
    assert "**Failed steps:**" in md
    assert (out / "logs" / "versions.log").exists() and (out / "proof.log").exists()
