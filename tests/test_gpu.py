"""GPU probes on a machine without a GPU: awareness detection and its overrides."""
import ctypes

import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import gpu


def test_detection_reports_every_probe(monkeypatch):
    monkeypatch.delenv("MPICOLL_CUDA_AWARE", raising=False)
    rep = gpu.cuda_aware_report()
    assert rep["library"] and rep["source"]
    # The probe agrees with the library's own answer, read independently here.
    try:
        fn = ctypes.CDLL(MPI.__file__).MPIX_Query_cuda_support
    except AttributeError:
        fn = None
    if fn is not None:
        assert rep["mpix_query"] == bool(fn()) == rep["cuda_aware"]
        assert rep["source"] == "MPIX_Query_cuda_support"


@pytest.mark.parametrize("value,expected",
                         [("1", True), ("0", False), ("yes", True), ("off", False)])
def test_override(monkeypatch, value, expected):
    monkeypatch.delenv("LD_PRELOAD", raising=False)     # not under `mpicoll.gpu env`'s exports
    monkeypatch.setenv("MPICOLL_CUDA_AWARE", value)
    assert gpu.cuda_aware() is expected
    assert gpu.cuda_aware_report()["source"] == "MPICOLL_CUDA_AWARE"


def test_the_ucx_setup_of_gpu_env_is_named_as_the_source(monkeypatch, tmp_path):
    """The exports of `python -m mpicoll.gpu env` (from a stand-in libucx folder) make the
    report say the decision rests on UCX point-to-point; a part of them missing does not.
    """
    from mpicoll.device import gpu_env as _gpu_env
    lib = tmp_path / "libucx" / "lib"
    lib.mkdir(parents=True)
    for n in ("libucs", "libucm", "libuct", "libucp"):
        (lib / f"{n}.so.0").write_bytes(b"")
    env = _gpu_env.aware_env(root=str(tmp_path / "libucx"), preload="", library_path="")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    rep = gpu.cuda_aware_report()
    assert rep["cuda_aware"] is True and rep["ucx"].startswith(f"UCX point-to-point: {lib} ")
    assert rep["source"] == "MPICOLL_CUDA_AWARE (UCX point-to-point)"
    monkeypatch.setenv("MPIR_CVAR_CH4_NETMOD", "ofi")        # another netmod: not that setup
    rep = gpu.cuda_aware_report()
    assert rep["ucx"] is None and rep["source"] == "MPICOLL_CUDA_AWARE"


def test_junk_override_is_an_error(monkeypatch):
    monkeypatch.setenv("MPICOLL_CUDA_AWARE", "maybe")
    with pytest.raises(mpicoll.ArgumentError,
                       match="MPICOLL_CUDA_AWARE: expected 0 or 1; got 'maybe'"):
        gpu.cuda_aware()


def test_cupy_status_names_the_reason():
    ok, reason = gpu.cupy_status()
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert not ok and "not installed" in reason
    else:
        assert isinstance(ok, bool) and reason


def _no_cupy(monkeypatch):
    """Make ``import cupy`` fail here, whether or not CuPy is installed."""
    import builtins
    real = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("No module named 'cupy' (hidden by the test)")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", fake_import)


def test_select_device_without_cupy_names_the_reason(monkeypatch):
    _no_cupy(monkeypatch)
    with pytest.raises(RuntimeError, match="no GPU for this rank: cupy is not installed"):
        gpu.select_device()
    ok, why = gpu.nccl_status()
    assert not ok and "cupy is not installed" in why


@pytest.mark.parametrize("var", ["SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"])
def test_local_rank_from_the_launcher(monkeypatch, var):
    for v in ("SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
              "MV2_COMM_WORLD_LOCAL_RANK"):
        monkeypatch.delenv(v, raising=False)
    assert gpu.local_rank() == (0, "MPI shared-memory split")   # one process: rank 0 of its node
    monkeypatch.setenv(var, "3")
    assert gpu.local_rank() == (3, var)


def test_device_path_follows_the_override(monkeypatch):
    import numpy as np
    monkeypatch.delenv("MPICOLL_CUDA_AWARE", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)     # not under `mpicoll.gpu env`'s exports
    assert gpu.device_path(np.ones(2))["path"] == "host"
    try:
        gpu.set_cuda_aware(True)
        path = gpu.device_path()
        assert {k: path[k] for k in ("path", "cuda_aware", "source")} == {
            "path": "cuda-aware", "cuda_aware": True, "source": "mpicoll.gpu.set_cuda_aware"}
        # point-to-point only: the library's own collectives stay staged
        assert path["collectives"] == "staged"
        assert "MPICOLL_CUDA_AWARE_COLLECTIVES=1" in path["collectives_source"]
        gpu.set_cuda_aware(False)
        assert gpu.device_path()["path"] == "staged"
        with pytest.raises(TypeError, match="value: expected True, False or None; got str"):
            gpu.set_cuda_aware("yes")
    finally:
        gpu.set_cuda_aware(None)
    monkeypatch.setenv("MPICOLL_CUDA_AWARE", "1")
    path = gpu.device_path()
    assert {k: path[k] for k in ("path", "cuda_aware", "source")} == {
        "path": "cuda-aware", "cuda_aware": True, "source": "MPICOLL_CUDA_AWARE"}
    monkeypatch.setenv("MPICOLL_CUDA_AWARE_COLLECTIVES", "1")
    assert gpu.device_path()["collectives"] == "cuda-aware"
    monkeypatch.delenv("MPICOLL_CUDA_AWARE_COLLECTIVES")
    # The decision is cached (the collectives use the same one); detecting again
    # after the variable is gone: the wheels on this machine are not CUDA-aware.
    monkeypatch.delenv("MPICOLL_CUDA_AWARE")
    assert gpu.device_path()["source"] == "MPICOLL_CUDA_AWARE"
    gpu.set_cuda_aware(None)
    rep = gpu.cuda_aware_report()
    assert gpu.device_path()["path"] == ("cuda-aware" if rep["cuda_aware"] else "staged")


class _Runtime:
    """cupy.cuda.runtime stand-in: no device reachable, or none present."""

    def __init__(self, count):
        self.count = count

    def getDeviceCount(self):
        if self.count is None:
            raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return self.count


@pytest.mark.parametrize("count,reason", [
    (None, "cupy cannot reach a CUDA device: cudaErrorNoDevice"),
    (0, "cupy sees no CUDA device"),
])
def test_cupy_without_a_device_names_the_reason(monkeypatch, count, reason):
    import sys
    import types
    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=_Runtime(count))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    ok, why = gpu.cupy_status()
    assert not ok and why.startswith(reason)
    assert gpu.device_precheck() == (False, why)
    with pytest.raises(RuntimeError, match="no GPU for this rank: " + reason):
        gpu.select_device()
