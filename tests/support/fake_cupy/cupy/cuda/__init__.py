"""``cupy.cuda`` of the CPU stand-in: devices, the current stream, pinned memory, ``runtime``."""
from . import runtime

__all__ = ["Device", "Stream", "get_current_stream", "alloc_pinned_memory", "runtime"]


class Device:
    """A device number; ``use()`` and ``with`` make it current (nothing runs anywhere else)."""

    def __init__(self, device=None):
        self.id = runtime.getDevice() if device is None else int(device)
        runtime._check(self.id)

    def use(self):
        runtime.setDevice(self.id)

    def __enter__(self):
        self._prev = runtime.getDevice()
        runtime.setDevice(self.id)
        return self

    def __exit__(self, *exc):
        runtime.setDevice(self._prev)
        return False

    @property
    def pci_bus_id(self):
        return runtime.deviceGetPCIBusId(self.id)

    def synchronize(self):
        pass


class Stream:
    """The stand-in's only stream: work is done when it is queued."""

    ptr = 0

    def synchronize(self):
        pass


_STREAM = Stream()


def get_current_stream():
    return _STREAM


def alloc_pinned_memory(nbytes):
    return bytearray(nbytes)
