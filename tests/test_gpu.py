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


@pytest.mark.parametrize("value,expected", [("1", True), ("0", False), ("yes", True), ("off", False)])
def test_override(monkeypatch, value, expected):
    monkeypatch.setenv("MPICOLL_CUDA_AWARE", value)
    assert gpu.cuda_aware() is expected
    assert gpu.cuda_aware_report()["source"] == "MPICOLL_CUDA_AWARE"


def test_junk_override_is_an_error(monkeypatch):
    monkeypatch.setenv("MPICOLL_CUDA_AWARE", "maybe")
    with pytest.raises(mpicoll.ArgumentError, match="MPICOLL_CUDA_AWARE: expected 0 or 1; got 'maybe'"):
        gpu.cuda_aware()


def test_cupy_status_names_the_reason():
    ok, reason = gpu.cupy_status()
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert not ok and "not installed" in reason
    else:
        assert isinstance(ok, bool) and reason
