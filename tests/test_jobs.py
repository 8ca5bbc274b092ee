"""The Slurm job scripts (jobs/*.sh), submitted to a local Slurm cluster on 127.0.0.1.

The module-scoped ``cluster`` fixture runs ``scripts/local_slurm.sh up`` (installs Debian's
slurmctld/slurmd/slurm-client with apt when missing; needs root) with two Slurm nodes on this
machine (two slurmd), on a private directory and free ports, and ``down`` in a ``finally``.
Without root or apt the cluster tests skip with the reason, except under ``CI=true``, where
they fail. Every job is submitted with small settings (command-line options override the
scripts' ``#SBATCH`` lines; the sweeps come from environment variables), all at once, then
polled with ``scontrol`` until each ends.

Static checks of the scripts and the GPU job's fail-fast path without Slurm need no cluster.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = os.path.join(ROOT, "jobs")
LOCAL_SLURM = os.path.join(ROOT, "scripts", "local_slurm.sh")
IN_CI = os.environ.get("CI", "").lower() == "true"
IN_VENV = sys.prefix != sys.base_prefix
HAS_MATPLOTLIB = subprocess.run([sys.executable, "-c", "import matplotlib"],
                                capture_output=True).returncode == 0
WAIT_S = int(os.environ.get("MPICOLL_JOB_TEST_WAIT", "900"))

# The module's fixtures (a local Slurm, maybe installed by apt, and every job run to its end)
# are set up inside its first test's timeout.
pytestmark = pytest.mark.timeout(WAIT_S + 900)


def job_scripts():
    """jobs/*.sh that are jobs (have #SBATCH lines): env.sh is sourced, not submitted."""
    out = []
    for name in sorted(os.listdir(JOBS)):
        path = os.path.join(JOBS, name)
        if name.endswith(".sh") and re.search(r"^#SBATCH ", open(path).read(), re.M):
            out.append(name)
    return out


def sbatch_options(name):
    opts = {}
    for line in open(os.path.join(JOBS, name)):
        m = re.match(r"#SBATCH\s+--([a-z-]+)(?:=(\S+))?", line)
        if m:
            opts[m.group(1)] = m.group(2)
    return opts


def job_env(**extra):
    """The environment sbatch passes on: the running venv, no pytest variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SLURM_"))}
    if IN_VENV:
        env["MPICOLL_VENV"] = sys.prefix
        env["PATH"] = os.path.join(sys.prefix, "bin") + os.pathsep + env.get("PATH", "")
    env.pop("MPICOLL_RESULTS_ROOT", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


# --- static checks ----------------------------------------------------------------------------

def test_every_required_job_exists():
    have = set(job_scripts())
    assert {"demo.sh", "test.sh", "bench_cpu.sh", "bench_native_forced.sh", "bench_gpu.sh"} <= have
    assert os.path.isfile(os.path.join(JOBS, "env.sh"))


@pytest.mark.parametrize("name", job_scripts())
def test_job_script_header(name):
    text = open(os.path.join(JOBS, name)).read()
    opts = sbatch_options(name)
    # Account and partition come from `sbatch -A/-p`, never from the script.
    assert not re.search(r"^#SBATCH\s+(-A|-p|--account|--partition|--qos)\b", text, re.M), name
    for key in ("job-name", "time", "output", "nodes"):
        assert key in opts, f"{name}: no #SBATCH --{key}"
    assert opts["job-name"].startswith("mpicoll-")
    assert "ntasks-per-node" in opts or "ntasks" in opts, name
    assert 'source "$MPICOLL_HOME/jobs/env.sh"' in text and "mpicoll_init" in text
    assert "mpicoll_finish" in text
    if name == "bench_cpu.sh" or name == "bench_native_forced.sh":
        assert int(opts["nodes"]) >= 2, f"{name} is the multi-node benchmark"
    if name == "bench_gpu.sh":
        assert opts["gpus-per-node"] == opts["ntasks-per-node"], "one rank per GPU"


def test_scripts_parse_and_pass_shellcheck():
    scripts = [os.path.join(JOBS, n) for n in os.listdir(JOBS) if n.endswith(".sh")]
    scripts += [os.path.join(JOBS, "lib", "task.sh"), LOCAL_SLURM]
    for path in scripts:
        r = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
        assert r.returncode == 0, f"{path}: {r.stderr}"
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", "-x"] + scripts, capture_output=True, text=True,
                           cwd=ROOT)
        assert r.returncode == 0, r.stdout + r.stderr


def test_launcher_is_srun_mpi_with_mpiexec_fallback():
    env_sh = open(os.path.join(JOBS, "env.sh")).read()
    assert 'srun "--mpi=$plugin"' in env_sh and "plugin=pmi2" in env_sh
    assert "falling back to mpiexec" in env_sh


def test_gpu_job_without_slurm_or_gpu_fails_fast(tmp_path):
    if (shutil.which("nvidia-smi")
            and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0):
        pytest.skip("this machine has NVIDIA GPUs")
    t0 = time.monotonic()
    r = subprocess.run(["bash", os.path.join(JOBS, "bench_gpu.sh")], capture_output=True,
                       text=True, cwd=ROOT, env=job_env(MPICOLL_RESULTS_ROOT=tmp_path), timeout=60)
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode == 3, out
    assert "needs NVIDIA GPUs" in out and "GPU partition" in out, out
    assert took < 60, f"took {took:.1f} s"   # it stops before any launch (a loaded VM: slack)
    (res,) = tmp_path.iterdir()
    assert res.name.startswith("mpicoll-bench-gpu-local-")
    summary = json.loads((res / "summary.json").read_text())
    assert summary["status"] == "failed"


def test_env_sh_run_directly_is_harmless():
    r = subprocess.run(["bash", os.path.join(JOBS, "env.sh")], capture_output=True, text=True,
                       cwd=ROOT, env=job_env(), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not a job" in r.stdout


def test_env_sh_site_setup_and_modules(tmp_path):
    site = tmp_path / "site.sh"
    site.write_text('module() { [ "$1" = load ] && shift && export '
                    'LOADEDMODULES="${LOADEDMODULES:+$LOADEDMODULES:}$(echo "$*" | tr " " :)"; '
                    '}\n')
    r = subprocess.run(["bash", os.path.join(JOBS, "env.sh")], capture_output=True, text=True,
                       cwd=ROOT,
                       env=job_env(MPICOLL_SITE_SETUP=site, MPICOLL_MODULES="gcc/12 openmpi/5"),
                       timeout=60)
    assert r.returncode == 0 and "modules=gcc/12:openmpi/5" in r.stdout, r.stdout + r.stderr
    env = job_env(MPICOLL_MODULES="gcc/12", MODULESHOME=str(tmp_path))
    r = subprocess.run(["bash", "--noprofile", "--norc", os.path.join(JOBS, "env.sh")],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    if "no `module` command" not in r.stderr:   # a machine with Lmod/Environment Modules installed
        pytest.skip("this machine has a module system")
    assert r.returncode == 2


# --- the local cluster ------------------------------------------------------------------------

def _free_port_range(n):
    """A port P with P .. P+n-1 free (slurmctld, then one slurmd per node)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 60000:
            continue
        try:
            for k in range(1, n):
                with socket.socket() as s2:
                    s2.bind(("127.0.0.1", port + k))
            return port
        except OSError:
            continue
    raise RuntimeError(f"no {n} consecutive free ports")


def _unavailable(reason):
    if IN_CI:
        pytest.fail(f"CI=true but the Slurm job tests cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def cluster():
    if not sys.platform.startswith("linux"):
        _unavailable("the local Slurm cluster needs Linux")
    if os.environ.get("SLURM_JOB_ID"):
        _unavailable("already inside a Slurm job")
    if os.geteuid() != 0:
        _unavailable("the local Slurm cluster needs root (SlurmUser=root, apt-get install)")
    if not (shutil.which("slurmctld") and shutil.which("slurmd") and shutil.which("sbatch")) \
            and not shutil.which("apt-get"):
        _unavailable("Slurm is not installed and there is no apt-get to install it")
    workdir = tempfile.mkdtemp(prefix="mpicoll-jobs-test-")
    env = job_env(MPICOLL_SLURM_DIR=os.path.join(workdir, "slurm"),
                  MPICOLL_SLURM_PORT=_free_port_range(3), MPICOLL_SLURM_NODES=2,
                  MPICOLL_SLURM_CPUS=4)
    try:
        up = subprocess.run(["bash", LOCAL_SLURM, "up"], env=env, capture_output=True, text=True,
                            timeout=600)
        if up.returncode != 0:
            pytest.fail(f"local_slurm.sh up failed:\n{up.stdout}\n{up.stderr}")
        env["SLURM_CONF"] = os.path.join(workdir, "slurm", "etc", "slurm.conf")
        yield {"env": env, "dir": workdir}
    finally:
        down = subprocess.run(["bash", LOCAL_SLURM, "down"], env=env, capture_output=True,
                              text=True, timeout=120)
        print(down.stdout, down.stderr)
        if os.environ.get("MPICOLL_JOB_TEST_KEEP"):
            print(f"kept {workdir} (MPICOLL_JOB_TEST_KEEP)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _gpus():
    if not shutil.which("nvidia-smi"):
        return 0
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return len(re.findall(r"^GPU ", r.stdout, re.M)) if r.returncode == 0 else 0


SMALL = "-b 8 -e 1K -f 8 -n 2 -w 1"

# name -> (script, sbatch options, environment, expect success)
def _submissions(results_root):
    gpus = _gpus()
    r = {"MPICOLL_RESULTS_ROOT": results_root}
    subs = {
        # default results root: results/<job name>-<job id>/ in the checkout
        "demo": ("demo.sh", ["-N", "1", "--ntasks-per-node=4"], {}, True),
        "test": ("test.sh", ["-N", "1", "--ntasks-per-node=3"],
                 dict(r, MPICOLL_JOB_PYTEST_ARGS="-k 'test_matrix and allreduce'"), True),
        # the script's own --nodes=2: two Slurm nodes (two slurmd on this machine)
        "bench_cpu": ("bench_cpu.sh", ["--ntasks-per-node=2"],
                      dict(r, MPICOLL_BENCH_SIZES=SMALL), True),
        "bench_forced": ("bench_native_forced.sh", ["-N", "1", "--ntasks-per-node=3"],
                         dict(r, MPICOLL_BENCH_SIZES=SMALL,
                              MPICOLL_FORCED_PRIMITIVES="allreduce,bcast,allgather,barrier"),
                         True),
        # srun without the right PMI plugin starts singletons: the job must notice and use mpiexec
        # (and submitted from elsewhere: the job finds the checkout from the script's path)
        "fallback": ("demo.sh", ["-N", "1", "--ntasks-per-node=2", "-J", "mpicoll-demo-fallback"],
                     dict(r, MPICOLL_SRUN_MPI="none", MPICOLL_DEMO_ARGS="--only barrier"), True),
        # a failing step must fail the job
        "failing": ("test.sh", ["-N", "1", "--ntasks-per-node=2", "-J", "mpicoll-test-failing"],
                    dict(r, MPICOLL_JOB_PYTEST_ARGS="-k no_such_test_anywhere"), False),
    }
    if gpus:
        n = min(gpus, 2)
        subs["bench_gpu"] = ("bench_gpu.sh", ["-N", "1", f"--gpus-per-node={n}",
                                              f"--ntasks-per-node={n}", "--cpus-per-task=1"],
                             dict(r, MPICOLL_BENCH_SIZES=SMALL), True)
    else:
        # No GPU here: the node has no gres/gpu, so ask for none; the job must stop at once.
        subs["bench_gpu"] = ("bench_gpu.sh", ["-N", "1", "--gpus-per-node=0",
                                              "--ntasks-per-node=2", "--cpus-per-task=1"],
                             r, False)
    return subs


def _job_info(jid, env):
    r = subprocess.run(["scontrol", "show", "job", str(jid), "-o"], env=env, capture_output=True,
                       text=True, timeout=30)
    return dict(re.findall(r"(\w+)=(\S*)", r.stdout)) if r.returncode == 0 else {}


@pytest.fixture(scope="module")
def finished_jobs(cluster):
    env = cluster["env"]
    logs = os.path.join(cluster["dir"], "logs")
    results_root = os.path.join(cluster["dir"], "results")
    os.makedirs(logs)
    subs = _submissions(results_root)
    jobs = {}
    for key, (script, opts, extra, ok) in subs.items():
        elsewhere = key == "fallback"
        cmd = ["sbatch", "--parsable", "-A", "ci", "-p", "debug",
               f"--output={logs}/%x-%j.out"] + opts
        cmd.append(os.path.join(JOBS if elsewhere else "jobs", script))
        r = subprocess.run(cmd, cwd=logs if elsewhere else ROOT, env=dict(env, **extra),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"
        jobs[key] = {"id": r.stdout.strip().split(";")[0], "script": script, "ok": ok,
                     "extra": extra, "t_submit": time.monotonic()}
    deadline = time.monotonic() + WAIT_S
    pending = set(jobs)
    while pending and time.monotonic() < deadline:
        for key in sorted(pending):
            info = _job_info(jobs[key]["id"], env)
            state = info.get("JobState", "")
            if state and state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING",
                                       "SUSPENDED", "REQUEUED"):
                jobs[key].update(info=info, t_end=time.monotonic())
                pending.discard(key)
        time.sleep(0.5)
    for key in pending:
        jobs[key]["info"] = _job_info(jobs[key]["id"], env)
    yield jobs
    for key, job in jobs.items():
        if key == "demo" and job.get("passed"):
            shutil.rmtree(os.path.join(ROOT, "results", f"mpicoll-demo-{job['id']}"),
                          ignore_errors=True)


def _log(job):
    path = job["info"].get("StdOut", "")
    return open(path).read() if path and os.path.exists(path) else f"(no log at {path!r})"


def _check_finished(job, *, ok=True):
    info = job.get("info", {})
    state, code = info.get("JobState"), info.get("ExitCode")
    log = _log(job)
    assert state not in (None, "PENDING", "RUNNING", "COMPLETING"), \
        f"job {job['id']} ({job['script']}) still {state} after {WAIT_S} s:\n{log[-6000:]}"
    if ok:
        assert (state, code) == ("COMPLETED", "0:0"), \
            f"{job['script']}: {state} {code}\n{log[-12000:]}"
    else:
        assert state == "FAILED" and code != "0:0", \
            f"{job['script']}: {state} {code}\n{log[-12000:]}"
    # Provenance opens the log.
    assert re.match(r"=+ provenance =+\njob +: " + re.escape(job["info"]["JobName"]), log), \
        log[:2000]
    return log


def _results_dir(job, root=None):
    name = job["info"]["JobName"]
    base = root or job["extra"].get("MPICOLL_RESULTS_ROOT") or os.path.join(ROOT, "results")
    d = os.path.join(base, f"{name}-{job['id']}")
    assert os.path.isdir(d), f"no results directory {d}"
    return d


def _load_json(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def _jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _common_results(job, ntasks):
    d = _results_dir(job)
    summary = _load_json(d, "summary.json")
    assert summary["status"] == "ok", summary
    assert summary["job_id"] == job["id"]
    prov = _load_json(d, "provenance.json")
    assert prov["packages"]["mpicoll"] and prov["mpi_library_version"]
    assert prov["slurm"]["SLURM_JOB_ID"] == job["id"]
    mpi = _load_json(d, "mpi.json")
    assert mpi["size"] == ntasks
    assert os.path.getsize(os.path.join(d, "job.log")) > 0
    return d


def _bench_results(d, files, min_rows):
    rows = []
    for f in files:
        recs = _jsonl(os.path.join(d, f))
        assert recs[0]["type"] == "provenance" and recs[-1]["type"] == "end", f
        assert recs[-1]["total_wrong"] == 0
        rows += [r for r in recs if r["type"] == "result"]
    assert len(rows) >= min_rows
    report = open(os.path.join(d, "report.md")).read()
    assert report.strip()
    if HAS_MATPLOTLIB:
        with open(os.path.join(d, "plot.png"), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    return rows


@pytest.mark.full
def test_demo_job(finished_jobs):
    job = finished_jobs["demo"]
    log = _check_finished(job)
    assert "launcher: srun --mpi=pmi2" in log
    d = _common_results(job, 4)
    assert os.path.getsize(os.path.join(d, "demo.txt")) > 0
    job["passed"] = True


@pytest.mark.full
def test_test_job(finished_jobs):
    job = finished_jobs["test"]
    _check_finished(job)
    d = _common_results(job, 3)
    tests = _load_json(d, "tests.json")
    assert tests["ok"] and tests["ntasks"] == 3 and tests["total"]["passed"] >= 3
    assert set(tests["ranks"]) == {"0", "1", "2"}


@pytest.mark.full
def test_bench_cpu_job(finished_jobs):
    job = finished_jobs["bench_cpu"]
    _check_finished(job)
    assert job["info"]["NumNodes"] == "2", job["info"].get("NumNodes")
    d = _common_results(job, 4)
    assert sorted(_load_json(d, "mpi.json")["ranks_per_node"].values()) == [2, 2]
    assert _load_json(d, "provenance.json")["slurm"]["SLURM_JOB_NUM_NODES"] == "2"
    rows = _bench_results(d, ["bench.jsonl"], 1)
    import mpicoll
    # Two nodes: the shm algorithms cannot run; the bench skips them with the reason.
    want = {(p, a) for p in mpicoll.PRIMITIVES for a in mpicoll.algorithms(p) if a != "shm"}
    got = {(r["primitive"], r["algorithm"]) for r in rows}
    assert want <= got, f"missing primitive x algorithm rows: {sorted(want - got)}"
    skips = {(r["primitive"], r["algorithm"]): r["reason"]
             for r in _jsonl(os.path.join(d, "bench.jsonl")) if r["type"] == "skip"}
    for p in mpicoll.PRIMITIVES:
        if "shm" in mpicoll.algorithms(p):
            assert "every rank must be on one node" in skips[(p, "shm")], skips
    with open(os.path.join(d, "bench.csv")) as f:
        assert len(f.read().splitlines()) == len(rows) + 1


@pytest.mark.full
def test_bench_native_forced_job(finished_jobs):
    job = finished_jobs["bench_forced"]
    _check_finished(job)
    d = _common_results(job, 3)
    files = sorted(f for f in os.listdir(d) if f.startswith("forced-") and f.endswith(".jsonl"))
    assert files == [f"forced-{p}.jsonl"
                     for p in sorted(["allreduce", "bcast", "allgather", "barrier"])]
    rows = _bench_results(d, files, 1)
    forced = {(r["primitive"], (r.get("native_forced") or {}).get("name")) for r in rows}
    assert ("allreduce", "ring") in forced and ("bcast", "binomial") in forced, sorted(forced)
    hand = {(r["primitive"], r["algorithm"]) for r in rows}
    assert ("allreduce", "ring") in hand and ("allgather", "bruck") in hand


@pytest.mark.full
def test_srun_without_pmi_falls_back_to_mpiexec(finished_jobs):
    job = finished_jobs["fallback"]
    log = _check_finished(job)
    assert "falling back to mpiexec" in log and "launcher: mpiexec" in log
    _common_results(job, 2)


@pytest.mark.full
def test_failing_step_fails_the_job(finished_jobs):
    job = finished_jobs["failing"]
    log = _check_finished(job, ok=False)
    assert "FAILED steps" in log
    d = _results_dir(job)
    assert _load_json(d, "summary.json")["status"] == "failed"


@pytest.mark.full
def test_bench_gpu_job(finished_jobs):
    job = finished_jobs["bench_gpu"]
    if job["ok"]:
        _check_finished(job)
        d = _common_results(job, int(job["info"].get("NumTasks", 1)))
        _bench_results(d, ["bench.jsonl"], 1)
        assert _load_json(d, "gpu.json")["devices"] >= 1
        return
    log = _check_finished(job, ok=False)
    assert job["info"]["ExitCode"] == "3:0", job["info"]["ExitCode"]
    assert "bench_gpu.sh needs" in log and "GPU partition" in log, log
    # Stopped before any launch (checked below); the bound is loose: 2 cores, six other jobs.
    assert job["info"].get("RunTime", "99:99:99") <= "00:02:00", job["info"].get("RunTime")
    assert "mpi-check" not in log and "step bench" not in log, "it must stop before any launch"
