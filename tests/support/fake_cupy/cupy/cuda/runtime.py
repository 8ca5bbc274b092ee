"""``cupy.cuda.runtime`` of the CPU stand-in: device count, properties and versions.

No ``ipcGetMemHandle``: mpicoll's CuPy adapter therefore reports no CUDA IPC
for real CuPy arrays here; the stand-in's arrays use the fake adapter's IPC.
"""
import os

is_hip = False
_current = 0


def getDeviceCount():
    return int(os.environ.get("FAKE_CUPY_DEVICES", "1"))


def _check(dev):
    if not 0 <= dev < getDeviceCount():
        raise RuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {dev} (stand-in)")


def getDevice():
    return _current


def setDevice(dev):
    global _current
    _check(dev)
    _current = dev


def getDeviceProperties(dev):
    _check(dev)
    return {"name": b"Stand-in GPU (tests/support/fake_cupy, CPU memory)",
            "totalGlobalMem": 1 << 34, "major": 0, "minor": 0, "multiProcessorCount": 1}


def deviceGetPCIBusId(dev):
    _check(dev)
    return f"0000:{dev:02x}:00.0"


def runtimeGetVersion():
    return 12080


def driverGetVersion():
    return 12080
