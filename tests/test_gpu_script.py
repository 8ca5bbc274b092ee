"""scripts/gpu_proof.sh on a machine without a GPU: it must stop at once (exit 3), install nothing.

Its GPU steps cannot run here; their bookkeeping can: with a stand-in ``nvidia-smi`` that lists
a GPU and ``--no-install`` on this venv, every GPU step fails (no CuPy), the script carries on,
writes RUN.md with each command and exit code, and exits 1.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import mpicoll.gpu
from mpicoll.device import gpu_env as _gpu_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_proof.sh")


def run(*args, env=None, timeout=60):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(["bash", SCRIPT, *args], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def fake_smi(tmp_path, listing):
    path = tmp_path / "nvidia-smi"
    path.write_text(f"#!/bin/sh\nif [ \"$1\" = \"-L\" ]; then printf '{listing}'; "
                    f"else echo table; fi\n")
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
    for word in ("--quick", "--no-install", "--out", "tests/mpi/test_device.py", "--xp cupy",
                 "RUN.md"):
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
    assert re.match(rf"gpu_proof\.sh: needs an NVIDIA GPU, but .*{why}.*: nothing installed, "
                    rf"nothing run$", lines[0]), lines
    assert not venv.exists() and not out.exists()


def test_the_real_nvidia_smi_check_here():
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    r = run()
    assert r.returncode == 3 and "needs an NVIDIA GPU" in r.stderr, (r.returncode, r.stderr)


@pytest.mark.full
def test_failing_steps_are_recorded_and_the_run_goes_on(tmp_path):
    if mpicoll.gpu.cupy_status()[0]:
        pytest.skip("CuPy works here: the GPU steps would run for real")
    if not os.path.exists(os.path.join(sys.prefix, "bin", "mpiexec")):
        pytest.skip(f"no mpiexec in {sys.prefix}/bin (the script runs the venv's own)")
    out = tmp_path / "out"
    r = run("--quick", "--no-install", "--out", str(out), "--primitives", "allreduce,bcast",
            timeout=400,
            env={"MPICOLL_NVIDIA_SMI": fake_smi(tmp_path, "GPU 0: Stand-in GPU (UUID: GPU-0)\\n"),
                 "MPICOLL_MPS_CONTROL": str(tmp_path / "no-mps-control"),
                 "MPICOLL_GPU_VENV": sys.prefix, "MPICOLL_STEP_TIMEOUT": "60"})
    assert r.returncode == 1, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    md = (out / "RUN.md").read_text()
    steps = dict(re.findall(r"^\| (\S+) \| (\d+)(?: \*\*FAILED\*\*)? \| [\d.]+ \|", md, re.M))
    # Every step ran, in spite of the failures before it; exit codes as each command gave them.
    assert steps["nvidia-smi"] == "0" and steps["versions"] == "1", steps
    # MPS cannot start here: its runs are skipped, the tests run once with MPS off, N = 1 once.
    assert steps["mps-start"] != "0" and "mps-stop" not in steps, steps
    want = ["test-ipc-mps_off-n1", "test-staged-mps_off-n2", "test-aware-mps_off-n2",
            "test-ipc-mps_off-n2"]
    assert sorted(k for k in steps if k.startswith("test-")) == sorted(want), steps
    for t in ("staged", "aware", "ipc"):
        for name in (f"test-{t}-mps_off-n2", f"bench-allreduce-{t}-mps_off-n2",
                     f"bench-bcast-{t}-mps_off-n2"):
            assert steps[name] != "0", (name, steps)
    # The aware transport's steps run under `python -m mpicoll.gpu env`, which fails without
    # the libucx wheel: they stop there (exit 97) and say why.
    assert steps["test-aware-mps_off-n2"] == "97", steps
    log = (out / "logs" / "test-aware-mps_off-n2.log").read_text()
    assert "libucx wheel is not installed" in log
    assert steps["demo-gpu-n2"] == "3" and steps["example-all_reduce-gpu-n2"] == "3", steps
    flat = md.replace(f"{sys.prefix}/bin/", "")
    assert "MPICOLL_TEST_XP=cupy MPICOLL_GPU_TRANSPORT=staged" in md
    assert "MPICOLL_TEST_XP=cupy-ipc,cupy-host-copy MPICOLL_GPU_TRANSPORT=ipc" in md and \
        "python -m mpi4py -m pytest --with-mpi -q --timeout=120 --timeout-method=thread " \
        "tests/mpi/test_device.py tests/mpi/test_device_requests.py" in flat
    assert re.search(r"MPICOLL_GPU_TRANSPORT=ipc mpiexec -n 2 python -m mpicoll\.bench allreduce "
                     r"--xp cupy "
                     r"--algorithm [a-z_,]*native,nccl,gloo,torch-mpicoll --sizes 8,64K,1M", flat)
    assert re.search(r"MPICOLL_GPU_TRANSPORT=staged mpiexec -n 2 python -m mpicoll\.bench "
                     r"allreduce --xp cupy "
                     r"--algorithm [a-z_,]*native --sizes", flat)
    assert "GPU targets" in md and "No allreduce bench records" in md
    assert "| device path | **staged** (decided by MPIX_Query_cuda_support); the library's " \
        "collectives: staged |" in md
    assert "- GPU 0: Stand-in GPU" in md and "UUID" not in md
    assert "**Failed steps:**" in md
    assert (out / "logs" / "versions.log").exists() and (out / "proof.log").exists()


def _libmpi_of_this_venv():
    """MPI4PY_LIBMPI naming the MPI library beside this interpreter (the mpich wheel puts it
    in the venv's lib/): the new venv sees this one's packages through a .pth file but looks
    for libmpi under its own prefix, where no wheel was installed (on the GPU machine the
    carried mpich wheel puts it there). Without it the test would pass only where a system
    libmpi happens to be installed.
    """
    found = sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmpi.so.*")))  # not the .so stub
    return {"MPI4PY_LIBMPI": found[0]} if found else {}


@pytest.mark.full
def test_offline_install_from_carried_wheels(tmp_path):
    """--wheels DIR (the GPU machine has no network): a plain venv that sees the interpreter's
    own packages through a .pth file, DIR's wheels installed with --no-index, the checkout on
    PYTHONPATH; then the run goes on as usual.
    """
    if mpicoll.gpu.cupy_status()[0]:
        pytest.skip("CuPy works here: the GPU steps would run for real")
    wheels, venv, out = tmp_path / "whl", tmp_path / "venv", tmp_path / "out"
    wheels.mkdir()
    r = run("--quick", "--wheels", str(wheels), "--out", str(out), "--transports", "staged",
            "--mps", "off", "--test-ranks", "1", "--primitives", "allreduce", timeout=400,
            env={"MPICOLL_NVIDIA_SMI": fake_smi(tmp_path, "GPU 0: Stand-in GPU\\n"),
                 "MPICOLL_GPU_VENV": str(venv), "PYTHON": sys.executable,
                 "MPICOLL_STEP_TIMEOUT": "60", **_libmpi_of_this_venv()})
    assert r.returncode == 1, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    md = (out / "RUN.md").read_text()
    steps = dict(re.findall(r"^\| (\S+) \| (\d+)(?: \*\*FAILED\*\*)? \| [\d.]+ \|", md, re.M))
    assert steps["venv"] == "0" and steps["image-site"] == "0", steps
    assert steps["install-wheels"] != "0", steps        # an empty folder: nothing to install
    assert "pip-upgrade" not in steps and "install" not in steps, steps
    # The new venv found mpi4py, NumPy and mpicoll (this checkout) without installing them:
    # the versions step gets as far as CuPy, which is missing here.
    versions = (out / "logs" / "versions.log").read_text()
    assert "mpi4py" in versions and "cupy_status" in versions and "No module named" not in \
        versions.split("cupy_status")[0], versions
    assert (venv / "bin" / "python").exists()
    assert "Written by `scripts/gpu_proof.sh --quick --wheels" in md


def test_targets_table_from_bench_records(tmp_path):
    """scripts/gpu_targets.py: the best checked hand-written row per size, native/nccl and
    wrong rows ignored, the 8-byte time only for N = 4 with MPS on, unmeasured sizes named.
    """
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import gpu_targets
    finally:
        sys.path.pop(0)

    def rec(algo, nbytes, busbw, median, wrong=0, moved=None):
        return {"type": "result", "primitive": "allreduce", "algorithm": algo, "bytes": nbytes,
                "busbw_GBps": busbw, "time_us": {"avg": median + 1, "median": median},
                "checked": True, "wrong": wrong, "moved_by": moved}
    rows = [rec("ring", 256 << 20, 310.0, 1e3, moved={"ipc": {"msgs": 8, "bytes": 1 << 30},
                                                     "staged": {"msgs": 0, "bytes": 0}}),
            rec("rabenseifner", 256 << 20, 290.0, 1e3),
            rec("native", 256 << 20, 900.0, 1e2), rec("native[ring]", 256 << 20, 800.0, 1e2),
            rec("gloo", 256 << 20, 700.0, 1e2), rec("ring", 16 << 20, 150.0, 1e2, wrong=3),
            rec("recursive_doubling", 16 << 20, 80.0, 1e2, moved={
                "staged": {"msgs": 2, "bytes": 1 << 20}, "ipc": {"msgs": 2, "bytes": 1 << 24}}),
            rec("recursive_doubling", 8, 0.0, 85.0),
            {"type": "provenance"}]
    with open(tmp_path / "bench-allreduce-ipc-mps_on-n4.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with open(tmp_path / "bench-allreduce-staged-mps_off-n2.jsonl", "w") as f:
        f.write(json.dumps(rec("ring", 16 << 20, 5.0, 1e4)) + "\n")
    text = gpu_targets.table(str(tmp_path))
    ipc = next(line for line in text.splitlines() if line.startswith("| ipc | on | 4 |"))
    assert "310.0 GB/s (ring via ipc) met" in ipc           # not native's, gloo's, nor 290
    # The wrong ring row is ignored; two paths moved messages, the one with more bytes first.
    assert "80.0 GB/s (recursive_doubling via ipc+staged) **missed**" in ipc
    assert "85.0 us (recursive_doubling) met" in ipc        # the median, not the average
    staged = next(line for line in text.splitlines() if line.startswith("| staged | off | 2 |"))
    assert staged.count("not measured") == 1 and "(target: N=4, MPS on)" in staged
    assert "5.0 GB/s (ring) **missed**" in staged
    assert gpu_targets.main([str(tmp_path / "nope")]) == 2


def test_latency_table_from_latency_records(tmp_path):
    """scripts/gpu_targets.py's per-face table: 8-byte rows only, the goal applied to the
    agree face at N = 4 with MPS on, other runs marked, no records named.
    """
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import gpu_targets
    finally:
        sys.path.pop(0)
    assert "No 8-byte latency records" in gpu_targets.latency_table(str(tmp_path))
    faces = ("raw", "agree", "p2pcomm", "local", "persistent", "nonblocking")

    def rec(algo, nbytes, agree):
        return {"primitive": "allreduce", "ranks": 4, "bytes": nbytes, "algorithm": algo,
                "us_per_call": dict(zip(faces, (20.0, agree, agree + 5, agree - 5, 60.0, 150.0),
                                        strict=True))}
    with open(tmp_path / "latency-ipc-mps_on-n4.jsonl", "w") as f:
        for r in (rec("ring", 8, 140.0), rec("recursive_doubling", 8, 90.0),
                  rec("ring", 1024, 50.0)):
            f.write(json.dumps(r) + "\n")
    with open(tmp_path / "latency-staged-mps_off-n4.jsonl", "w") as f:
        f.write(json.dumps(rec("ring", 8, 300.0)) + "\n")
    lines = gpu_targets.latency_table(str(tmp_path)).splitlines()
    ring = next(x for x in lines if x.startswith("| ipc | on | 4 | ring |"))
    rd = next(x for x in lines if x.startswith("| ipc | on | 4 | recursive_doubling |"))
    # Records made before the raw_nb face existed show '-' in its column.
    assert "| 20.0 | 140.0 | 145.0 | 135.0 | 60.0 | - | 150.0 | **missed**" in ring
    assert "| 90.0 |" in rd and "met (goal <= 100)" in rd
    assert len([x for x in lines if x.startswith("| ipc |")]) == 2      # 1024 B not listed
    staged = next(x for x in lines if x.startswith("| staged |"))
    assert "(target: N=4, MPS on)" in staged


def test_a_spent_budget_skips_steps_but_writes_run_md(tmp_path):
    """--budget: a step with under 15 s left (after the reserve for the reports) is not
    started but recorded as skipped; the reports and RUN.md are still written, and RUN.md
    names what did not run. A junk budget is refused before anything runs.
    """
    out = tmp_path / "out"
    r = run("--quick", "--no-install", "--out", str(out), "--budget", "40", timeout=120,
            env={"MPICOLL_NVIDIA_SMI": fake_smi(tmp_path, "GPU 0: Stand-in GPU\\n"),
                 "MPICOLL_MPS_CONTROL": str(tmp_path / "no-mps-control"),
                 "MPICOLL_GPU_VENV": sys.prefix, "MPICOLL_PROOF_RESERVE": "30"})
    assert r.returncode == 0, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    md = (out / "RUN.md").read_text()
    skipped = re.findall(r"^\| (\S+) \| skipped \| 0\.0 \|", md, re.M)
    assert "nvidia-smi" in skipped and "test-ipc-mps_off-n1" in skipped, md[-3000:]
    # Nothing ran but the targets table (the reserve is for it and the reports).
    assert re.findall(r"^\| (\S+) \| \d+", md, re.M) == ["targets"]
    assert "**Not run: the --budget of 40 s was spent before:** nvidia-smi" in md
    assert "GPU targets" in md and "FAILED" not in md
    bad = run("--budget", "ten", env={"MPICOLL_NVIDIA_SMI": fake_smi(tmp_path, "GPU 0: x\\n")})
    assert bad.returncode == 2 and "--budget: expected whole seconds" in bad.stderr


@pytest.mark.full
def test_mps_that_cannot_serve_is_stopped_and_the_run_is_packed(tmp_path):
    """An MPS daemon that starts but cannot serve a CUDA client (mps-probe: no CuPy here) is
    stopped at once and its runs are skipped; --pack leaves the whole output as one archive
    with RUN.md and steps.tsv beside it (the H200 hands back only a few files).
    """
    if mpicoll.gpu.cupy_status()[0]:
        pytest.skip("CuPy works here: the probe would pass")
    calls = tmp_path / "mps-calls"
    ctl = tmp_path / "mps-control"
    # A stand-in control: `-d` "starts" (and keeps no output open), `quit` on stdin stops.
    ctl.write_text(f"#!/bin/sh\nif [ \"$1\" = -d ]; then echo start >> {calls}; exit 0; fi\n"
                   f"read cmd; echo \"$cmd\" >> {calls}\n")
    ctl.chmod(0o755)
    out, packed = tmp_path / "out", tmp_path / "back" / "proof.tar.gz"
    r = run("--quick", "--no-install", "--transports", "staged", "--test-ranks", "1",
            "--primitives", "allreduce", "--out", str(out), "--pack", str(packed), timeout=300,
            env={"MPICOLL_NVIDIA_SMI": fake_smi(tmp_path, "GPU 0: Stand-in GPU\\n"),
                 "MPICOLL_MPS_CONTROL": str(ctl), "MPICOLL_GPU_VENV": sys.prefix,
                 "MPICOLL_STEP_TIMEOUT": "60"})
    assert r.returncode == 1, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    assert calls.read_text().split() == ["start", "quit"]
    md = (out / "RUN.md").read_text()
    steps = dict(re.findall(r"^\| (\S+) \| (\d+)(?: \*\*FAILED\*\*)? \| [\d.]+ \|", md, re.M))
    assert steps["mps-start"] == "0" and steps["mps-probe"] != "0" and steps["mps-stop"] == "0"
    assert not any("mps_on" in k for k in steps), steps       # the MPS-on runs were skipped
    assert "test-staged-mps_off-n1" in steps, steps
    import tarfile
    with tarfile.open(packed) as tar:
        names = tar.getnames()
        inner = tar.extractfile("out/RUN.md").read().decode()
    assert "out/steps.tsv" in names and "out/logs/mps-probe.log" in names, names
    assert inner == md
    assert (packed.parent / "RUN.md").read_text() == md
    assert (packed.parent / "steps.tsv").read_text() == (out / "steps.tsv").read_text()
    back = sorted(p.name for p in packed.parent.iterdir())
    assert back == ["RUN.md", "proof.tar.gz", "steps.tsv"]


FAKE_CUPY = os.path.join(ROOT, "tests", "support", "fake_cupy")


def _fake_libucx(tmp_path):
    """A stand-in for the libucx wheel: a ``libucx`` package whose libraries are the mpich
    wheel's own UCX (built without CUDA -- enough for the CuPy stand-in's arrays, which are
    host memory), so the aware transport's exports load a real UCX; None without one.
    """
    src = os.path.join(sys.prefix, "lib", "mpich")
    if not all(os.path.exists(os.path.join(src, n)) for n in _gpu_env._LIBS):
        return None
    pkg = tmp_path / "ucx" / "libucx"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for n in _gpu_env._LIBS:                          # the libraries `mpicoll.gpu env` preloads
        os.symlink(os.path.join(src, n), pkg / "lib" / n)
    if os.path.isdir(os.path.join(src, "ucx")):
        os.symlink(os.path.join(src, "ucx"), pkg / "lib" / "ucx")
    return str(tmp_path / "ucx")


@pytest.mark.full
def test_the_whole_proof_passes_on_the_stand_ins(tmp_path):
    """Every step of the proof, run for real on CPU stand-ins: CuPy (tests/support/fake_cupy: fake
    device arrays, IPC through shared memory; the torch columns are skipped on them, with the
    reason, where torch is installed: it cannot view them through DLPack),
    the libucx wheel (the mpich wheel's UCX: the aware transport's exports), an MPS control
    that starts. Every step must pass -- the tests, bench and latency on each transport and
    MPS state, the demo, the example, the reports -- and the targets table must be filled
    from the records with the path that moved the messages: the one run on a lent GPU must
    not be lost to bookkeeping. (The figures are the CPU's; nothing here is about speed.)
    """
    if mpicoll.gpu.cupy_status()[0]:
        pytest.skip("CuPy works here: the stand-in would hide it")
    if not os.path.exists(os.path.join(sys.prefix, "bin", "mpiexec")):
        pytest.skip(f"no mpiexec in {sys.prefix}/bin (the script runs the venv's own)")
    ucx = _fake_libucx(tmp_path)
    transports = ["ipc", "aware", "staged"] if ucx else ["ipc", "staged"]
    calls = tmp_path / "mps-calls"
    ctl = tmp_path / "mps-control"
    ctl.write_text(f"#!/bin/sh\nif [ \"$1\" = -d ]; then echo start >> {calls}; exit 0; fi\n"
                   f"read cmd; echo \"$cmd\" >> {calls}\n")
    ctl.chmod(0o755)
    path = [FAKE_CUPY] + ([ucx] if ucx else []) + \
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    out = tmp_path / "out"
    r = run("--quick", "--no-install", "--transports", ",".join(transports), "--mps", "on,off",
            "--out", str(out), timeout=600,
            env={"PYTHONPATH": os.pathsep.join(path),
                 "MPICOLL_NVIDIA_SMI": fake_smi(tmp_path, "GPU 0: Stand-in GPU (UUID: GPU-0)\\n"),
                 "MPICOLL_MPS_CONTROL": str(ctl), "MPICOLL_GPU_VENV": sys.prefix,
                 "MPICOLL_STEP_TIMEOUT": "240",
                 "MPICOLL_BENCH_SIZES": "--sizes 8,16M -n 2 -w 1 -c 1"})
    md = (out / "RUN.md").read_text()
    assert r.returncode == 0, (r.returncode, md[-6000:], r.stdout[-3000:])
    table = md.split("## Steps")[1].split("Logs:")[0]
    steps = dict(re.findall(r"^\| (\S+) \| (\S+?)(?: \*\*FAILED\*\*)? \| [\d.]+ \|", table, re.M))
    assert set(steps.values()) == {"0"}, steps               # nothing failed, nothing skipped
    assert calls.read_text().split() == ["start", "quit"]
    combos = [f"{t}-mps_{m}" for m in ("on", "off") for t in transports]
    want = {"nvidia-smi", "versions", "mps-start", "mps-probe", "mps-stop", "demo-gpu-n2",
            "example-all_reduce-gpu-n2", "targets", f"test-{transports[0]}-mps_on-n1"}
    want |= {f"test-{t}-mps_on-n2" for t in transports}     # the tests in the first state only
    for c in combos:
        want |= {f"bench-allreduce-{c}-n2", f"latency-{c}-n2", f"report-{c}"}
    assert set(steps) == want, set(steps) ^ want
    for t in transports:
        log = (out / "logs" / f"test-{t}-mps_on-n2.log").read_text()
        assert re.search(r"\d+ passed", log) and "failed" not in log and "error" not in log, log
    # The bench checked every row; each hand-written row says what moved its messages:
    # 8 B on host copies, 16 MiB through the transport under test.
    moved16 = {"ipc": "ipc", "aware": "cuda-aware", "staged": "staged"}
    for c in combos:
        text = (out / f"bench-allreduce-{c}-n2.jsonl").read_text()
        recs = [json.loads(x) for x in text.split("\n") if x.strip()]
        res = [x for x in recs if x["type"] == "result"]
        assert res and all(x["checked"] and x["wrong"] == 0 for x in res), c
        algos = {x["algorithm"] for x in res}
        first = c.startswith(transports[0] + "-")   # the nccl and torch columns run there only
        # torch cannot view the stand-in's arrays (no DLPack): those columns are skipped with
        # the reason, as NCCL's (or for want of torch, where it is not installed).
        assert not algos & {"gloo", "torch-mpicoll", "nccl"}, (c, algos)
        if first:
            assert "cupy.cuda.nccl is not importable" in recs[0]["nccl"]["reason"]
            for label in ("gloo", "torch-mpicoll"):
                assert recs[0][label]["used"] is False and re.search(
                    r"DLPack|torch is not usable", recs[0][label]["reason"]), recs[0][label]
        for x in res:
            if x["algorithm"] == "native":          # the stand-in's collectives: staged
                assert x["moved_by"] == {"staged": {"msgs": 0, "bytes": 0}}, (c, x)
            else:
                assert set(x["moved_by"]) == ({"host-copy"} if x["bytes"] == 8 else
                                              {moved16[c.split("-")[0]]}), (c, x)
    # The targets table: every combination, a figure at 16 MiB (the CPU misses it), the
    # paths named; 256 MiB was not run; one 8-byte latency row per algorithm and combination.
    targets = (out / "targets.md").read_text()
    for c in combos:
        t, m = c.split("-mps_")
        row = next(x for x in targets.splitlines() if x.startswith(f"| {t} | {m} | 2 |"))
        assert re.search(rf"\| not measured \| [\d.]+ GB/s \([a-z_]+ via {moved16[t]}\) "
                         r"\*\*missed\*\*", row), row
        assert len([x for x in targets.splitlines()                 # the latency table's row
                    if x.startswith(f"| {t} | {m} | 2 | recursive_doubling | ")]) == 1
    for c in combos:
        t, m = c.split("-mps_")
        assert f"## Bench report: transport {t}, MPS {m}" in md
    assert "| CUDA IPC (the ipc transport) |" in md and "| NCCL (cupy.cuda.nccl) | no: " in md
    assert "All steps that ran passed." in md


def test_wheels_script_help_names_what_it_downloads():
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_wheels.sh"), "--help"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "libucx-cu13" in r.stdout and "64 MiB" in r.stdout
