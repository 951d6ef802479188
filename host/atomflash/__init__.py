"""atomflash: host library, specification and reference models for the
atomflash transactional flash-SSD controller.

The host library's entry point::

    import atomflash
    dev = atomflash.Device.attach_sim("build/run")
    try:
        dev.read(0)
    except atomflash.errors.Error as e:   # every exception the library raises
        ...
"""

__version__ = "0.1.0"

from . import errors  # noqa: E402
from .device import Device, DeviceSet, OpenList, Transaction  # noqa: E402

__all__ = ["Device", "DeviceSet", "OpenList", "Transaction", "errors", "__version__"]
