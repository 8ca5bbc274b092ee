"""Run ``smpirun -replay``: one simulated time per set of traces.

SimGrid is found through ``smpirun`` on the PATH and the replay program
``smpireplaymain`` (Debian: ``/usr/lib/<arch>/simgrid/``; or
``MPICOLL_SMPIREPLAYMAIN``). Where either is missing, :func:`require` raises
:class:`SimGridMissing` with the install command — never a hang: every
replay runs under a timeout.
"""
import glob
import os
import re
import shutil
import subprocess

__all__ = ["SimGridMissing", "ReplayFailed", "require", "available", "replay", "INSTALL"]

INSTALL = "apt-get install -y libsimgrid-dev   (Debian/Ubuntu: SimGrid 3.32 gives smpirun)"
_TIME = re.compile(r"^(\S+) Simulation time")


class SimGridMissing(RuntimeError):
    """SimGrid's ``smpirun`` or ``smpireplaymain`` is not installed."""


class ReplayFailed(RuntimeError):
    """``smpirun`` ended without a simulated time (its output's tail is in the message)."""


def _replaymain():
    env = os.environ.get("MPICOLL_SMPIREPLAYMAIN")
    if env:
        return env if os.access(env, os.X_OK) else None
    for path in sorted(glob.glob("/usr/lib/*/simgrid/smpireplaymain")) + \
            sorted(glob.glob("/usr/local/lib/simgrid/smpireplaymain")):
        if os.access(path, os.X_OK):
            return path
    return shutil.which("smpireplaymain")


def require():
    """(smpirun, smpireplaymain) paths; :class:`SimGridMissing` naming the install command."""
    smpirun, main = shutil.which("smpirun"), _replaymain()
    if not smpirun or not main:
        missing = "smpirun" if not smpirun else "smpireplaymain"
        raise SimGridMissing(f"simulate: SimGrid's {missing} was not found; install SimGrid: "
                             f"{INSTALL}")
    return smpirun, main


def available():
    """None where SimGrid can replay here, else why not (for skips)."""
    try:
        require()
    except SimGridMissing as exc:
        return str(exc)
    return None


def replay(listfile, xml, hostfile, nranks, cfg=(), timeout=600, cwd=None):
    """Replay the traces named in ``listfile`` on the platform; the simulated seconds.

    ``cfg``: extra ``--cfg=...`` settings (the platform's, a collective selector).
    """
    smpirun, main = require()
    # -no-privatize: a replay has no globals to privatize, and privatizing copies the
    # replay program once per rank (1,024 ranks: 20 s before the first action, 1 s without).
    cmd = [smpirun, "-np", str(nranks), "-platform", xml, "-hostfile", hostfile,
           "-replay", listfile, "-no-privatize", *cfg, main,
           "--log=smpi_replay.fmt:%.12r%e%m%n", "--log=root.thres:warning",
           "--log=smpi_replay.thres:info"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise ReplayFailed(f"smpirun ran past {timeout} s: {' '.join(cmd)}") from None
    for line in reversed(p.stdout.splitlines() + p.stderr.splitlines()):
        m = _TIME.match(line)
        if m:
            return float(m.group(1))
    tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-12:])
    raise ReplayFailed(f"smpirun exit {p.returncode} without a simulated time:\n{tail}")
