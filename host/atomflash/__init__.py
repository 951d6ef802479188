"""atomflash: host library, specification and reference models for the
atomflash transactional flash-SSD controller.

The host library's entry point::

    import atomflash
    dev = atomflash.Device.attach_sim("build/run")       # the debug port's host queues
    dev = atomflash.Device.attach_nvme(atomflash.NvmeHost(link, memory))   # an I/O queue over NVMe
    try:
        dev.read(0)
    except atomflash.errors.Error as e:   # every exception the library raises
        ...
"""

__version__ = "0.1.0"

from . import errors  # noqa: E402
from .device import Device, DeviceSet, NvmeDevice, OpenList, Transaction  # noqa: E402

__all__ = ["Device", "DeviceSet", "NvmeDevice", "NvmeHost", "NvmeError", "OpenList", "Transaction", "errors",
           "__version__"]

_LAZY = {"NvmeHost": "nvme", "NvmeError": "nvme"}   # imported on first use: most hosts never need them


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
