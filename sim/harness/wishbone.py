"""cocotb models for the classic Wishbone ports of rtl.lib.wishbone.

``WishboneMemory`` answers an initiator port (word dict, random wait states,
injectable bus errors, and on a port with ``cti`` incrementing bursts as
LiteX's bursting SRAM answers them); ``WishboneInitiator`` drives a target
port (register windows).  Ports are found by prefix: ``<prefix>__adr``,
``<prefix>__cyc``, ... (Amaranth's flattened names).
"""

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from rtl.lib.wishbone import CTI_INCREMENTING


class _Port:
    def __init__(self, dut, prefix):
        for name in ("adr", "dat_w", "dat_r", "sel", "cyc", "stb", "we", "ack", "err"):
            setattr(self, name, getattr(dut, f"{prefix}__{name}"))
        self.cti = getattr(dut, f"{prefix}__cti", None)


class WishboneMemory:
    """Word-addressed memory behind an initiator port.

    An access is answered after 0..``max_wait`` wait states.  On a port with ``cti``, an access tagged
    incrementing is, with share ``burst``, followed by a burst: the next word is answered in the cycle
    right after (before the initiator shows it), and so on while the tag stays; the initiator may end
    it by dropping ``stb`` (the early answer is ignored), and an access at another address then is an
    error, as is an access changed before its answer.  ``bursts`` counts the words answered early."""

    def __init__(self, dut, prefix, clk, *, max_wait=2, seed=0, burst=1.0):
        self.port = _Port(dut, prefix)
        self.clk = clk
        self.words: dict[int, int] = {}
        self.error_at: set[int] = set()
        self.max_wait = max_wait
        self.burst = burst if self.port.cti is not None else 0.0
        self.rng = random.Random(seed)
        self.reads = self.writes = self.bursts = 0
        self.port.ack.value = 0
        self.port.err.value = 0

    def start(self):
        return cocotb.start_soon(self._serve())

    def read_bytes(self, byte_addr, length):
        out = bytearray()
        for a in range(byte_addr, byte_addr + length, 4):
            out += self.words.get(a // 4, 0).to_bytes(4, "little")
        return bytes(out[:length])

    def write_bytes(self, byte_addr, raw):
        assert byte_addr % 4 == 0 and len(raw) % 4 == 0
        for i in range(0, len(raw), 4):
            self.words[(byte_addr + i) // 4] = int.from_bytes(raw[i:i + 4], "little")

    def _incrementing(self) -> bool:
        return bool(self.burst) and int(self.port.cti.value) == CTI_INCREMENTING and self.rng.random() < self.burst

    def _store(self, adr, wdata, sel):
        old = self.words.get(adr, 0)
        mask = sum(0xFF << (8 * i) for i in range(4) if sel >> i & 1)
        self.words[adr] = (old & ~mask) | (wdata & mask)
        self.writes += 1

    async def _serve(self):
        p = self.port
        while True:
            await RisingEdge(self.clk)
            p.ack.value = 0
            p.err.value = 0
            await ReadOnly()
            if not (p.cyc.value and p.stb.value):
                continue
            adr, we = int(p.adr.value), int(p.we.value)
            wdata, sel = (int(p.dat_w.value), int(p.sel.value)) if we else (0, 0)
            burst = self._incrementing()
            await RisingEdge(self.clk)
            for _ in range(self.rng.randint(0, self.max_wait)):
                await RisingEdge(self.clk)
            if adr in self.error_at:
                p.err.value = 1
                continue
            if we:
                self._store(adr, wdata, sel)
            else:
                p.dat_r.value = self.words.get(adr, 0)
                self.reads += 1
            p.ack.value = 1
            await ReadOnly()
            # what the answer takes is what the initiator shows while answered: it holds its access
            assert (int(p.adr.value), int(p.we.value), int(p.dat_w.value) if we else 0) == (adr, we, wdata), \
                f"the initiator changed its access at word {adr:#x} before it was answered"
            while burst:
                # the next word, answered in the cycle after the last before the initiator shows it
                await RisingEdge(self.clk)
                adr += 1
                refused = adr in self.error_at
                p.ack.value, p.err.value = int(not refused), int(refused)
                if not we and not refused:
                    p.dat_r.value = self.words.get(adr, 0)
                await ReadOnly()
                if not (p.cyc.value and p.stb.value):
                    break                       # the burst ended: the early answer is ignored
                assert (int(p.adr.value), int(p.we.value)) == (adr, we), \
                    f"a burst's next access is at word {int(p.adr.value):#x}, not {adr:#x}"
                self.bursts += 1
                if refused:
                    break
                if we:
                    self._store(adr, int(p.dat_w.value), int(p.sel.value))
                else:
                    self.reads += 1
                burst = self._incrementing()


class WishboneInitiator:
    """Single-word reads and writes on a target port."""

    def __init__(self, dut, prefix, clk):
        self.port = _Port(dut, prefix)
        self.clk = clk
        self.port.cyc.value = 0
        self.port.stb.value = 0
        self.port.we.value = 0

    async def _cycle(self, adr, we, data=0):
        p = self.port
        p.adr.value = adr
        p.dat_w.value = data
        p.we.value = we
        p.sel.value = 0xF
        p.cyc.value = 1
        p.stb.value = 1
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            if p.ack.value or p.err.value:
                break
        value = int(p.dat_r.value)
        err = int(p.err.value)
        await RisingEdge(self.clk)
        p.cyc.value = 0
        p.stb.value = 0
        p.we.value = 0
        if err:
            raise IOError(f"bus error at word 0x{adr:x}")
        return value

    async def write(self, byte_addr, value):
        await self._cycle(byte_addr // 4, 1, value)

    async def read(self, byte_addr):
        return await self._cycle(byte_addr // 4, 0)
