"""cocotb drivers for amaranth.lib.stream ports flattened into harness signals
``<name>_valid``, ``<name>_ready``, ``<name>_payload`` (or the top-level port
names ``<name>__valid`` ...).  Python wakes only on handshakes, never per idle
cycle."""

from __future__ import annotations

import cocotb
from cocotb.triggers import Event, FallingEdge, ReadOnly, RisingEdge


def _sig(dut, name, part):
    for sep in ("_", "__"):
        if hasattr(dut, f"{name}{sep}{part}"):
            return getattr(dut, f"{name}{sep}{part}")
    raise AttributeError(f"{dut._name} has no {name}_{part}")


class StreamSource:
    """Drives a stream into the design, one payload (an int) at a time."""

    def __init__(self, dut, name: str, clk):
        self.valid, self.ready, self.payload = (_sig(dut, name, p) for p in ("valid", "ready", "payload"))
        self.clk = clk
        self.valid.value = 0

    async def send(self, payload: int) -> None:
        self.payload.value = payload
        self.valid.value = 1
        while True:
            await ReadOnly()
            if int(self.ready.value):
                await RisingEdge(self.clk)      # the handshake happens on this edge
                break
            await RisingEdge(self.ready)
        await FallingEdge(self.clk)
        self.valid.value = 0


class StreamSink:
    """Always ready; collects every payload (an int) in ``items``."""

    def __init__(self, dut, name: str, clk):
        self.valid, self.ready, self.payload = (_sig(dut, name, p) for p in ("valid", "ready", "payload"))
        self.clk = clk
        self.items: list[int] = []
        self.event = Event()
        self.ready.value = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            if not int(self.valid.value):
                await RisingEdge(self.valid)
            await FallingEdge(self.clk)
            payload = int(self.payload.value)
            self.ready.value = 1
            await RisingEdge(self.clk)
            await FallingEdge(self.clk)
            self.ready.value = 0
            self.items.append(payload)
            self.event.set()

    async def wait_for(self, n: int) -> list[int]:
        while len(self.items) < n:
            self.event.clear()
            await self.event.wait()
        return self.items
