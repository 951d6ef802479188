"""A synchronous host driver on an Amaranth pysim simulation: the driver in a thread, the bus in the bench.

:class:`atomflash.nvme.NvmeHost` (and what is built on it) is synchronous: ``link.mmio_read`` returns a
value.  A pysim testbench is a coroutine.  :class:`ThreadedLink` joins them as cocotb's
``external``/``function`` do (``sim/pcie/nvme_host_bridge.py``): the driver runs in a worker thread
and each of its register accesses is handed to the testbench, which performs it on the BAR's Wishbone
port and hands the value back.  The two take turns, so simulated time passes only inside an access or
inside :meth:`advance` (the driver calls it between polls of host memory: a few cycles pass), and a
run is as deterministic as the simulation.

Use it like this::

    link = ThreadedLink(bar_access)          # async bar_access(ctx, offset, value=None) -> int
    async def bench(ctx):
        host = await link.run(ctx, lambda: NvmeHost(link, memory).initialize())

:class:`ThreadedBus` is the same without the ``NvmeLink`` names: ``read``, ``write`` and ``idle`` for
any synchronous party on a register port -- the C firmware's admin path (``tb/firmware_nvme``), whose
window accesses come from a ctypes callback.  Several parties, each with its own bus and testbench,
share a simulation: while one thinks, the simulation and every other party wait.
"""

from __future__ import annotations

import queue
import threading
from typing import Awaitable, Callable

__all__ = ["ThreadedBus", "ThreadedLink"]

_DONE = object()


class ThreadedBus:
    """A register port for synchronous code in a thread, served by a pysim testbench; see the module docstring.

    Parameters
    ----------
    access : ``async access(ctx, offset, value=None) -> int``
        One access in the simulation (a write when ``value`` is given).
    idle_cycles : int
        Cycles :meth:`idle` lets pass by default.
    """

    def __init__(self, access: Callable[..., Awaitable[int]], *, idle_cycles: int = 32):
        self.access, self.idle_cycles = access, idle_cycles
        self._requests: queue.Queue = queue.Queue()
        self.accesses = 0

    # -- the thread's side -------------------------------------------------------------------------------
    def _call(self, request):
        reply: queue.Queue = queue.Queue(1)
        self._requests.put((request, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value

    def read(self, offset: int) -> int:
        return self._call(("read", offset, None))

    def write(self, offset: int, value: int) -> None:
        self._call(("write", offset, value & 0xFFFF_FFFF))

    def idle(self, cycles: int | None = None) -> None:
        """Let the simulation run ``cycles`` (default ``idle_cycles``)."""
        self._call(("idle", self.idle_cycles if cycles is None else cycles, None))

    # -- the testbench's side ----------------------------------------------------------------------------
    async def run(self, ctx, work: Callable[[], object]):
        """Run ``work()`` in a thread, serving its accesses until it returns; its result, or its exception."""
        outcome: list = []

        def thread():
            try:
                outcome.append((True, work()))
            except BaseException as e:          # noqa: B036 - handed to the testbench, which raises it
                outcome.append((False, e))
            self._requests.put((_DONE, None))

        worker = threading.Thread(target=thread, daemon=True)
        worker.start()
        while True:
            request, reply = self._requests.get()   # the simulation waits while the driver thinks
            if request is _DONE:
                break
            kind, offset, value = request
            try:
                if kind == "idle":
                    await ctx.tick().repeat(offset)
                    result = None
                else:
                    self.accesses += 1
                    result = await self.access(ctx, offset, value if kind == "write" else None)
                reply.put((True, result))
            except BaseException as e:              # noqa: B036 - the driver's call raises it
                reply.put((False, e))
        worker.join()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value


class ThreadedLink(ThreadedBus):
    """An ``NvmeLink`` for a driver in a thread, served by a pysim testbench (BAR accesses); see the module
    docstring.  ``advance`` lets ``idle_cycles`` pass (the driver polls host memory)."""

    def mmio_read(self, offset: int) -> int:
        return self.read(offset)

    def mmio_write(self, offset: int, value: int) -> None:
        self.write(offset, value)

    def advance(self) -> None:
        self.idle()
