"""Several nodes on one machine: MPI and Slurm jobs across network namespaces.

``scripts/netns_cluster.sh up 3`` makes hosts mpc-h1..mpc-h3 (namespaces on the bridge mpcbr0,
10.77.0.11..13); the module-scoped ``cluster`` fixture brings them up once and takes everything
down afterwards (``down``, in a ``finally``). Each test launches through the script's
``mpiexec`` wrapper (hydra with the namespaces as hosts, TCP between them) and reads the JSON
lines of tests/support/netns_probe.py: the namespace and address of every rank, what
``Split_type(COMM_TYPE_SHARED)`` and mpicoll's layout detection say, a 1 KiB ping-pong, an
allreduce checked against numpy.

Skipped, with the reason, without root, without network namespaces (a throwaway ``ip netns
add`` fails), without MPICH's hydra, under an MPI launcher, with ``MPICOLL_TEST_NETNS=0``, or
when a namespace cluster is up already (someone's, or left over: ``scripts/netns_cluster.sh
down``). The Slurm test also needs slurmctld/slurmd/sbatch installed (``scripts/local_slurm.sh
up`` installs them). Runs hold a lock (/tmp/mpicoll-netns.lock): the names and the subnet are
machine-wide, so two runs wait for each other rather than collide.

To run something else across the hosts, e.g. the MPI test matrix of the node-aware algorithms::

    def test_hierarchical_matrix(cluster):
        r = run_across("mpc-h1:2,mpc-h2:1,mpc-h3:2",
                       [sys.executable, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-q",
                        "-p", "no:cacheprovider", "--timeout=300", "--timeout-method=thread",
                        "tests/mpi", "-k", "hierarchical"], timeout=600)
        assert r.returncode == 0, r.stdout[-20000:] + r.stderr[-5000:]
"""
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest
from launch import ROOT, mpi_env, run_bounded

SCRIPT = os.path.join(ROOT, "scripts", "netns_cluster.sh")
PROBE = os.path.join(ROOT, "tests", "support", "netns_probe.py")
LOCK = "/tmp/mpicoll-netns.lock"
HOSTS = 3
UNSUPPORTED = 77      # the script's exit code without root / namespace support
T0 = time.monotonic()


def _why_not():
    """Why these tests cannot run here (None: they can)."""
    if os.environ.get("MPICOLL_TEST_NETNS", "").strip() == "0":
        return "MPICOLL_TEST_NETNS=0"
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if any(k in os.environ for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")):
        return "running under an MPI launcher (every rank would build the cluster)"
    if os.geteuid() != 0:
        return "needs root (network namespaces, veths, a bridge)"
    if not shutil.which("ip"):
        return "no `ip` command (iproute2)"
    name = f"mpc-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return f"cannot create network namespaces here (ip netns add: {r.stderr.strip()})"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    mpx = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpx = mpx if os.path.exists(mpx) else shutil.which("mpiexec")
    if not mpx:
        return "no mpiexec (the mpich wheel's hydra) beside this Python or on PATH"
    v = subprocess.run([mpx, "--version"], capture_output=True, text=True, timeout=30)
    if "HYDRA" not in v.stdout:
        return f"{mpx} is not MPICH's hydra (the namespace launcher needs -launcher-exec)"
    return None


WHY_NOT = _why_not()
if WHY_NOT:
    pytest.skip(WHY_NOT, allow_module_level=True)

pytestmark = [pytest.mark.timeout(300), pytest.mark.full]


def _script(*args, timeout=120, env=None):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)


def _hosts(spec):
    """"mpc-h1:2,mpc-h2" -> [("mpc-h1", 2), ("mpc-h2", 1)]"""
    out = []
    for part in spec.split(","):
        name, _, count = part.partition(":")
        out.append((name, int(count or 1)))
    return out


def run_across(hosts_spec, argv, timeout=120, *, env=None, mpiexec_args=(), cwd=ROOT):
    """Run ``argv`` on the namespace hosts: ``hosts_spec`` as for hydra's ``-hosts``
    ("mpc-h1:2,mpc-h2:1,mpc-h3:2"; the rank count is the sum).

    Goes through ``scripts/netns_cluster.sh mpiexec`` (hydra, the namespaces as hosts, TCP between
    them). Bounded like tests/support/launch.py's ``run_mpi``: ``MPIEXEC_TIMEOUT`` lets hydra
    end a hung job; 30 s later mpiexec's process group is killed (hydra gives each proxy a
    session of its own, but proxies and ranks end within a second of mpiexec; the cluster's
    ``down`` ends whatever might still run inside a namespace). Returns the CompletedProcess
    with ``elapsed`` and ``timed_out`` added.
    """
    n = sum(c for _, c in _hosts(hosts_spec))
    full_env = mpi_env(timeout)
    full_env.update(env or {})
    cmd = ["bash", SCRIPT, "mpiexec", "-hosts", hosts_spec, "-n", str(n), *mpiexec_args, *argv]
    return run_bounded(cmd, timeout, full_env, cwd)


def probe_records(text):
    """The ``PROBE {...}`` lines of tests/support/netns_probe.py, in rank order."""
    recs = [json.loads(m) for m in re.findall(r"^PROBE (\{.*\})$", text, re.M)]
    return sorted(recs, key=lambda r: r["rank"])


def _veth_bytes(i):
    """Bytes the bridge side of host i's veth has sent + received (root namespace counters)."""
    base = f"/sys/class/net/mpc-v{i}/statistics"
    total = 0
    for k in ("rx_bytes", "tx_bytes"):
        with open(f"{base}/{k}") as f:
            total += int(f.read())
    return total


def _free_port_pair():
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("0.0.0.0", 0))
            port = s.getsockname()[1]
        if port > 60000:
            continue
        try:
            with socket.socket() as s2:
                s2.bind(("0.0.0.0", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports")


@pytest.fixture(scope="module")
def cluster():
    lock = open(LOCK, "a")
    deadline = time.monotonic() + 240
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                pytest.skip(f"another run has held {LOCK} for 240 s")
            time.sleep(1)
    env = dict(os.environ, MPICOLL_NETNS_SLURM_PORT=str(_free_port_pair()))
    mine = False      # take down only what this run brought up, never someone's cluster
    try:
        st = _script("status", env=env)
        if st.returncode == 0:
            pytest.skip("a namespace cluster is already up (`scripts/netns_cluster.sh status`; "
                        f"`down` removes it): {st.stdout.strip().replace(chr(10), '; ')}")
        t0 = time.monotonic()
        mine = True
        up = _script("up", str(HOSTS), env=env)
        if up.returncode == UNSUPPORTED:
            pytest.skip(up.stderr.strip())
        assert up.returncode == 0, f"netns_cluster.sh up {HOSTS} failed:\n{up.stdout}\n{up.stderr}"
        print(f"\nnetns cluster up ({HOSTS} hosts) in {time.monotonic() - t0:.1f} s")
        yield {"env": env}
    finally:
        if mine:
            t0 = time.monotonic()
            down = _script("down", env=env)
            print(f"netns cluster down in {time.monotonic() - t0:.1f} s (rc {down.returncode}): "
                  f"{down.stderr.strip()}")
            print(f"test_netns_cluster: {time.monotonic() - T0:.1f} s since import")
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _run_probe(hosts_spec, *extra, timeout=120):
    r = run_across(hosts_spec, [sys.executable, PROBE, *extra], timeout=timeout)
    out = r.stdout + r.stderr
    assert not r.timed_out, f"{hosts_spec}: timed out after {r.elapsed:.0f} s:\n{out[-8000:]}"
    assert r.returncode == 0, f"{hosts_spec}: exit {r.returncode}:\n{out[-8000:]}"
    recs = probe_records(r.stdout)
    assert len(recs) == sum(c for _, c in _hosts(hosts_spec)), out[-8000:]
    return r, recs


def _expected_placement(hosts_spec):
    """Rank -> namespace, and the node groups, for hydra's block placement of ``hosts_spec``."""
    where, groups, r = [], [], 0
    for name, count in _hosts(hosts_spec):
        where += [name] * count
        groups.append(list(range(r, r + count)))
        r += count
    return where, groups


def test_two_hosts_two_ranks_each(cluster):
    spec, iters = "mpc-h1:2,mpc-h2:2", 200
    before = _veth_bytes(2)
    r, recs = _run_probe(spec, "--allreduce", "--pingpong", "1024", "--iters", str(iters))
    moved = _veth_bytes(2) - before
    where, groups = _expected_placement(spec)
    assert [x["netns"] for x in recs] == where, recs
    assert [x["ip"] for x in recs] == ["10.77.0.11"] * 2 + ["10.77.0.12"] * 2, recs
    assert [x["shared"] for x in recs] == [2, 2, 2, 2], recs
    assert all(x["nodes"] == groups for x in recs), recs     # mpicoll's layout: [0 1] [2 3]
    assert all(x["allreduce_ok"] for x in recs), recs
    # Between hosts, the ping-pong (rank 0 <-> 2 and 3) went over the veths, not shared memory:
    # at least 2 peers x iters x 2 directions x 1 KiB (UCX over shared memory moves ~20 KB of
    # wire-up only).
    assert moved >= 2 * iters * 2 * 1024, f"only {moved} bytes crossed mpc-v2"
    pp = recs[0]["pingpong_us"]
    print(f"\n2x2: {r.elapsed:.1f} s; 1 KiB ping-pong (half round trip): same host "
          f"{pp['1']} us, other host {pp['2']} / {pp['3']} us; {moved} bytes on mpc-v2")


def test_three_hosts_uneven(cluster):
    spec = "mpc-h1:2,mpc-h2:1,mpc-h3:2"
    r, recs = _run_probe(spec, "--allreduce")
    where, groups = _expected_placement(spec)
    assert groups == [[0, 1], [2], [3, 4]]
    assert [x["netns"] for x in recs] == where, recs
    assert [x["shared"] for x in recs] == [2, 2, 1, 2, 2], recs
    assert all(x["nodes"] == groups for x in recs), recs
    assert all(x["allreduce_ok"] for x in recs), recs
    print(f"\n2+1+2: {r.elapsed:.1f} s; layout {recs[0]['nodes']}")


def test_hydra_check_survives_a_version_written_in_pieces(cluster, tmp_path):
    """`mpiexec` checks the launcher is hydra from its --version text. A CI run failed that check
    on the real hydra: under pipefail, `--version | grep -q HYDRA` fails when grep quits at the
    first match and the next write of the version text meets a closed pipe (SIGPIPE). A stand-in
    hydra that writes the banner first and the rest later must pass, and be run with the
    namespace launcher's options.
    """
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/bin/bash\n"
                    "if [[ $1 == --version ]]; then\n"
                    "  echo 'HYDRA build details:'; sleep 0.3\n"
                    "  for i in $(seq 200); do echo \"    Line $i: some build detail\"; done\n"
                    "  exit 0\n"
                    "fi\n"
                    "printf '%s\\n' \"FAKE-HYDRA $*\"\n")
    fake.chmod(0o755)
    env = dict(os.environ, MPICOLL_NETNS_MPIEXEC=str(fake))
    r = _script("mpiexec", "-n", "1", "true", env=env)
    assert r.returncode == 0, r.stderr
    ran = [line for line in r.stdout.splitlines() if line.startswith("FAKE-HYDRA ")]
    assert len(ran) == 1 and "-launcher-exec" in ran[0] and ran[0].endswith("-n 1 true"), r.stdout


@pytest.mark.parametrize("spec, matrix", [("mpc-h1:2,mpc-h2:2", False),
                                          ("mpc-h1:2,mpc-h2:1,mpc-h3:2", True)],
                         ids=["2x2", "2+1+2"])
@pytest.mark.timeout(480)        # beyond run_across's own 400 s bound
def test_hierarchical_matrix_across_hosts(cluster, spec, matrix):
    """The node-aware algorithms on real (namespace) nodes: tests/mpi/test_hierarchical.py
    (its layout test checks mpicoll saw the hosts) and, on the uneven layout, the generated
    matrix's blocking face (the other faces run the same plans: CI time is short).
    """
    argv = [sys.executable, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-q", "--color=no",
            "-p", "no:cacheprovider", "--timeout=300", "--timeout-method=thread",
            "tests/mpi/test_hierarchical.py"]
    if matrix:
        argv += ["tests/mpi/test_matrix.py",
                 "-k", "test_hierarchical or (test_matrix and blocking and hierarchical)"]
    r = run_across(spec, argv, timeout=400, env={"MPICOLL_NODES": ""})
    out = r.stdout + r.stderr
    n = sum(c for _, c in _hosts(spec))
    assert not r.timed_out, out[-20000:]
    summaries = re.findall(r"(\d+) passed(?:, \d+ \w+)* in ", out)
    assert r.returncode == 0 and len(summaries) == n, out[-20000:]
    assert not re.search(r"\b\d+ (failed|errors?)\b", out), out[-20000:]
    print(f"\n{spec}: hierarchical tests {summaries[0]} passed per rank in {r.elapsed:.1f} s")


@pytest.fixture(scope="module")
def slurm(cluster):
    missing = [c for c in ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "nsenter")
               if not shutil.which(c)]
    if missing:
        pytest.skip(f"Slurm is not installed (missing {' '.join(missing)}; "
                    "scripts/local_slurm.sh up installs it)")
    env = cluster["env"]
    t0 = time.monotonic()
    try:
        up = _script("slurm", "up", env=env)
        assert up.returncode == 0, f"netns_cluster.sh slurm up failed:\n{up.stdout}\n{up.stderr}"
        print(f"\nslurm up in {time.monotonic() - t0:.1f} s")
        conf = re.search(r"export SLURM_CONF=(\S+)", up.stdout).group(1)
        yield dict(env, SLURM_CONF=conf)
    finally:
        down = _script("slurm", "down", env=env)
        print(f"slurm down (rc {down.returncode}) {down.stderr.strip()}")


JOB = """#!/bin/bash
#SBATCH --job-name=mpicoll-netns-test
#SBATCH --time=5
# A step that has to wait for the previous one's CPUs: slurmctld wakes the waiting srun up at its
# host name (the per-namespace hostnames and /etc/hosts entries make that reach it).
srun -N 2 -n 4 sleep 2 &
sleep 0.5
srun -l -N 2 -n 4 bash -c 'echo "TASK $(hostname) $SLURMD_NODENAME $(ip netns identify $$)"'
wait
srun --mpi=pmi2 --kill-on-bad-exit=1 "$PYTHON" {probe} --allreduce
"""
JOB_WAIT_S = 180


def test_slurm_job_spans_two_namespaces(slurm, tmp_path):
    job = tmp_path / "job.sh"
    job.write_text(JOB.format(probe=PROBE))
    env = {k: v for k, v in slurm.items() if not k.startswith(("PYTEST_", "SLURM_"))}
    env.update(SLURM_CONF=slurm["SLURM_CONF"], PYTHON=sys.executable, PYTHONUNBUFFERED="1",
               PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    t0 = time.monotonic()
    sub = subprocess.run(["sbatch", "--parsable", "-N", "2", "--ntasks-per-node=2",
                          f"--output={tmp_path}/%j.out", str(job)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=60)
    assert sub.returncode == 0, sub.stderr
    jid = sub.stdout.strip().split(";")[0]
    info = {}
    while time.monotonic() - t0 < JOB_WAIT_S:
        q = subprocess.run(["scontrol", "show", "job", jid, "-o"], capture_output=True, text=True,
                           env=env, timeout=30)
        info = dict(re.findall(r"(\w+)=(\S*)", q.stdout))
        if info.get("JobState") not in (None, "PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            break
        time.sleep(0.3)
    log_path = tmp_path / f"{jid}.out"
    log = log_path.read_text() if log_path.exists() else "(no output file)"
    if info.get("JobState") in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
        subprocess.run(["scancel", jid], env=env, capture_output=True, timeout=30)
        pytest.fail(f"slurm job {jid} still {info.get('JobState')} after {JOB_WAIT_S} s:\n{log}")
    assert (info.get("JobState"), info.get("ExitCode")) == ("COMPLETED", "0:0"), f"{info}\n{log}"
    tasks = sorted(re.findall(r"^(\d+): TASK (\S+) (\S+) (\S+)$", log, re.M))
    assert [t[1:] for t in tasks] == [("mpc-h1",) * 3] * 2 + [("mpc-h2",) * 3] * 2, log
    recs = probe_records(log)
    assert len(recs) == 4, log
    assert len({x["ip"] for x in recs}) == 2 and len({x["netns"] for x in recs}) == 2, recs
    assert [x["slurm_node"] for x in recs] == ["mpc-h1", "mpc-h1", "mpc-h2", "mpc-h2"], recs
    assert [x["netns"] for x in recs] == ["mpc-h1", "mpc-h1", "mpc-h2", "mpc-h2"], recs
    assert [x["shared"] for x in recs] == [2, 2, 2, 2], recs
    assert all(x["nodes"] == [[0, 1], [2, 3]] for x in recs), recs
    assert all(x["allreduce_ok"] for x in recs), recs
    print(f"\nslurm job {jid}: {time.monotonic() - t0:.1f} s from sbatch to COMPLETED; "
          f"ranks on {[x['netns'] for x in recs]}")
