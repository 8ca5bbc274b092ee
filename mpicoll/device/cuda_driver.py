"""The CUDA driver calls CuPy does not wrap (``cuMemGetAddressRange``, ``cuPointerGetAttribute``).

Loaded once through ctypes, for the ipc transport (:mod:`mpicoll.device.ipc`) and
the CuPy adapter's IPC probes (:mod:`mpicoll.device.arrays`); no mpicoll imports.
"""
import ctypes
import threading

__all__ = ["cuda_driver"]

_driver = None
_driver_lock = threading.Lock()


class _CudaDriver:
    """``cuMemGetAddressRange`` and ``cuPointerGetAttribute`` from libcuda."""

    BUFFER_ID = 7                  # CU_POINTER_ATTRIBUTE_BUFFER_ID
    LEGACY_IPC_CAPABLE = 10        # CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE

    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        self._range = lib.cuMemGetAddressRange_v2
        self._range.restype = ctypes.c_int
        self._range.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                ctypes.c_uint64]
        self._attr = lib.cuPointerGetAttribute
        self._attr.restype = ctypes.c_int
        self._attr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]

    def address_range(self, ptr):
        """(base, size) of the allocation holding device pointer ``ptr``."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        rc = self._range(ctypes.byref(base), ctypes.byref(size), ptr)
        if rc:
            raise RuntimeError(f"cuMemGetAddressRange failed (CUresult {rc})")
        return base.value, size.value

    def buffer_id(self, ptr):
        out = ctypes.c_uint64()
        rc = self._attr(ctypes.byref(out), self.BUFFER_ID, ptr)
        if rc:
            raise RuntimeError(f"cuPointerGetAttribute(BUFFER_ID) failed (CUresult {rc})")
        return out.value

    def ipc_capable(self, ptr):
        out = ctypes.c_int()
        rc = self._attr(ctypes.byref(out), self.LEGACY_IPC_CAPABLE, ptr)
        return rc == 0 and bool(out.value)


def cuda_driver():
    """The libcuda helper (raises OSError where there is no CUDA driver)."""
    global _driver
    if _driver is None:
        with _driver_lock:
            if _driver is None:
                _driver = _CudaDriver()
    return _driver
