"""firmware/nvme.c on the host: the C admin path as a shared library, its window served by a simulation.

``build()`` compiles nvme.c with driver.c (host gcc, ``-DAF_NVME_HOST``) into build/firmware_nvme/ with
``sim.harness.runner.host_build`` (cached by a hash of the sources, headers, flags and compiler).
:class:`CNvmeFirmware` plays the same part as ``sim.harness.nvme_firmware.NvmeFirmwareModel``: its
:meth:`~CNvmeFirmware.run` is the firmware's main loop, to be run in a thread whose window accesses a
testbench serves (``sim.harness.threaded_link.ThreadedBus``).  The HAL and the FTL's hooks are ctypes
callbacks into Python; an exception in one is kept, ends the loop, and is raised by ``run``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Callable

from atomflash import spec
from atomflash.model.semantics import Limits
from sim.harness import runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FW = ROOT / "firmware"
CFLAGS = ["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-Wno-sign-conversion",
          "-Wno-unused-parameter"]

READ = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32)
WRITE = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32)
PUBLISH = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32)
IDLE = ctypes.CFUNCTYPE(ctypes.c_int)
FLUSH = ctypes.CFUNCTYPE(None, ctypes.c_int)
BLOCKS_IN_USE = ctypes.CFUNCTYPE(ctypes.c_uint64)
VENDOR_LOG = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32)
PERCENTAGE_USED = ctypes.CFUNCTYPE(ctypes.c_uint32)


def build() -> Path:
    """The shared library (cached by content hash; safe under pytest-xdist)."""
    return runner.host_build("libafnvme", [FW / "nvme.c", HERE / "driver.c"], build_dir="firmware_nvme",
                             cflags=CFLAGS, defines=["AF_NVME_HOST"], includes=[FW], shared=True)


_lib = None


def library() -> ctypes.CDLL:
    """The library, loaded once per process (its state is the firmware's globals)."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(str(build()))
        lib.afh_bind.argtypes = [READ, WRITE, PUBLISH, IDLE]
        lib.afh_start.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                  ctypes.c_uint32, ctypes.c_int, ctypes.c_char_p, FLUSH, BLOCKS_IN_USE, VENDOR_LOG,
                                  PERCENTAGE_USED]
        lib.afh_start.restype = ctypes.c_int
        lib.afh_error_count.restype = ctypes.c_uint64
        lib.afh_media_errors.restype = ctypes.c_uint64
        lib.afh_timeouts.restype = ctypes.c_uint32
        lib.afh_admin_commands.restype = ctypes.c_uint32
        lib.af_nvme_status_of.restype = ctypes.c_uint32
        lib.af_nvme_status_of.argtypes = [ctypes.c_uint32]
        _lib = lib
    return _lib


class CNvmeFirmware:
    """firmware/nvme.c through ``bus`` (``read``/``write``/``idle``, from the firmware's thread).

    Parameters are :class:`~sim.harness.nvme_firmware.NvmeFirmwareModel`'s, with synchronous hooks:
    ``flush(checkpoint)``, ``vendor_log(lid) -> bytes``, ``nuse() -> int``, ``percentage_used() -> int``;
    ``keep_running()`` says
    whether the main loop goes on when it has nothing to do.
    """

    def __init__(self, bus, soc, *, limits: Limits, scratch: int, staging_base: int,
                 io_queues: int = spec.NVME.IO_QUEUES, mqes: int = spec.NVME.MQES, volatile_cache: bool = False,
                 flush: Callable[[bool], None] | None = None, vendor_log: Callable[[int], bytes] | None = None,
                 nuse: Callable[[], int] = lambda: 0, percentage_used: Callable[[], int] = lambda: 0,
                 serial: str = "AF0001", keep_running: Callable[[], bool] = lambda: True, idle_cycles: int = 4):
        self.bus, self.soc, self.limits = bus, soc, limits
        self.scratch, self.staging_base = scratch, staging_base
        self.io_queues, self.mqes, self.volatile_cache = io_queues, mqes, volatile_cache
        self.flush, self.vendor_log, self.nuse, self.serial = flush, vendor_log, nuse, serial
        self.percentage_used = percentage_used
        self.keep_running, self.idle_cycles = keep_running, idle_cycles
        self.lib = library()
        self.failure: BaseException | None = None

    def _guard(self, fn, default):
        """A callback that keeps its exception (ctypes would print and drop it) and ends the loop."""
        def call(*args):
            if self.failure is not None:
                return default
            try:
                return fn(*args)
            except BaseException as e:       # noqa: B036 - raised by run()
                self.failure = e
                return default
        return call

    def _identify_record(self) -> bytes:
        L = self.limits
        return spec.IDENTIFY.pack(magic=spec.IDENTIFY_MAGIC, spec_version=spec.SPEC_VERSION, capacity=L.capacity,
                                  lba_size=L.lba_size, max_transfer=L.max_transfer,
                                  max_atomic_pages=L.max_atomic_pages, max_open_tx=L.max_open_tx,
                                  max_pending=L.max_pending, max_remap_triples=L.max_remap_triples,
                                  max_appends=L.max_appends)

    def _vendor(self, lid, page, size):
        data = self.vendor_log(lid)
        if data is None or len(data) > size:
            return -1
        ctypes.memmove(page, data, len(data))
        return len(data)

    def run(self) -> None:
        """Start, then serve until ``keep_running()`` is false while idle (in the firmware's thread)."""
        g = self._guard

        def idle() -> int:
            if not self.keep_running():
                return 0
            self.bus.idle(self.idle_cycles)
            return 1

        callbacks = [READ(g(self.bus.read, 0)), WRITE(g(self.bus.write, None)),
                     PUBLISH(g(lambda addr, data, n: self.soc.write_bytes(addr, ctypes.string_at(data, n)), None)),
                     IDLE(g(idle, 0))]
        hooks = [FLUSH(g(lambda checkpoint: self.flush(bool(checkpoint)), None)) if self.flush else FLUSH(),
                 BLOCKS_IN_USE(g(self.nuse, 0)),
                 VENDOR_LOG(g(self._vendor, -1)) if self.vendor_log else VENDOR_LOG(),
                 PERCENTAGE_USED(g(self.percentage_used, 0))]
        self._keep = callbacks + hooks          # alive while C holds them
        self.lib.afh_bind(*callbacks)
        if self.lib.afh_start(self._identify_record(), self.scratch, self.staging_base, self.io_queues, self.mqes,
                              int(self.volatile_cache), self.serial.encode(), *hooks) != 0:
            raise AssertionError("firmware: the window is not the NVMe controller's")
        self.lib.afh_run()
        if self.failure is not None:
            raise self.failure
        if self.timeouts:
            raise AssertionError(f"firmware: {self.timeouts} waits on the window gave up")

    @property
    def error_count(self) -> int:
        return self.lib.afh_error_count()

    @property
    def media_errors(self) -> int:
        return self.lib.afh_media_errors()

    @property
    def timeouts(self) -> int:
        return self.lib.afh_timeouts()

    @property
    def admin_commands(self) -> int:
        return self.lib.afh_admin_commands()
