"""``python -m mpicoll.gpu env``: the exports for CUDA-aware MPICH from PyPI wheels.

A stand-in ``libucx`` package (the real wheel's layout: ``libucx/lib/libu*.so.0``
and ``libucx/lib/ucx/``) on PYTHONPATH; the printed lines are evaluated by
bash and the resulting environment checked. Without the package the command
prints a shell line that fails with the reason.
"""
import os
import subprocess
import sys

import pytest

from mpicoll.device import gpu_env as _gpu_env


def _fake_libucx(root):
    lib = root / "libucx" / "lib"
    (lib / "ucx").mkdir(parents=True)
    (root / "libucx" / "__init__.py").write_text("")
    for name in ("libucs.so.0", "libucm.so.0", "libuct.so.0", "libucp.so.0"):
        (lib / name).write_bytes(b"")
    return lib


def _bash(script, env):
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=60)


def test_env_exports_evaluate_in_bash(tmp_path):
    lib = _fake_libucx(tmp_path)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               LD_PRELOAD="")
    script = (f'eval "$({sys.executable} -m mpicoll.gpu env)" && '
              'echo "$LD_PRELOAD|$UCX_MODULE_DIR|$MPIR_CVAR_CH4_NETMOD|$MPIR_CVAR_NOLOCAL|'
              '$MPICOLL_CUDA_AWARE"')
    out = _bash(script, env)
    assert out.returncode == 0, out.stderr
    preload, moddir, netmod, nolocal, aware = out.stdout.strip().split("|")
    assert preload.split(":") == [str(lib / n) for n in
                                  ("libucs.so.0", "libucm.so.0", "libuct.so.0", "libucp.so.0")]
    assert moddir == str(lib / "ucx") and netmod == "ucx" and nolocal == "1" and aware == "1"


def test_env_keeps_an_existing_preload(tmp_path):
    lib = _fake_libucx(tmp_path)
    env = _gpu_env.aware_env(str(tmp_path / "libucx"), preload="/opt/x.so")
    assert env["LD_PRELOAD"].endswith(":/opt/x.so")
    assert env["LD_PRELOAD"].startswith(str(lib / "libucs.so.0"))


def test_env_puts_the_wheels_libraries_first_on_the_library_path(tmp_path):
    """The wheel's lib and its vendored .libs folder (auditwheel's), then what was there."""
    lib = _fake_libucx(tmp_path)
    (tmp_path / "libucx_cu13.libs").mkdir()
    env = _gpu_env.aware_env(str(tmp_path / "libucx"), library_path="/usr/local/lib")
    assert env["LD_LIBRARY_PATH"].split(":") == [
        str(lib), str(tmp_path / "libucx_cu13.libs"), "/usr/local/lib"]
    assert _gpu_env.aware_env(str(tmp_path / "libucx"), library_path="")[
        "LD_LIBRARY_PATH"].split(":") == [str(lib), str(tmp_path / "libucx_cu13.libs")]


def test_env_without_the_wheel_fails_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(_gpu_env, "ucx_dir", lambda: None)
    with pytest.raises(LookupError, match="gpu-aware"):
        _gpu_env.aware_env()
    out = _bash(f'eval "$({sys.executable} -c \'import sys; '
                f'from mpicoll.device import gpu_env as _gpu_env; '
                f'_gpu_env.ucx_dir = lambda: None; sys.exit(_gpu_env.main(["env"]))\')"',
                dict(os.environ))
    assert out.returncode != 0 and "libucx wheel is not installed" in out.stderr


def test_usage_on_anything_else():
    # on stderr, so that eval "$(python -m mpicoll.gpu nonsense)" runs nothing
    out = subprocess.run([sys.executable, "-m", "mpicoll.gpu", "nonsense"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "usage" in out.stderr and out.stdout == ""
    out = subprocess.run([sys.executable, "-m", "mpicoll.gpu", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "usage" in out.stdout
