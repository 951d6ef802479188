"""A small real Amaranth block standing in for the controller core.

It proves the SoC integration path end to end before the controller exists:
Amaranth -> Verilog at build time -> migen ``Instance`` in the LiteX SoC ->
Wishbone slave (registers, the IDENTIFY record) read by the firmware, and a
Wishbone master that copies the IDENTIFY record into main RAM (the data path
the controller's DMA will use, and exactly what the IDENTIFY opcode does: "copy
the IDENTIFY record to buf").

Its port names are the controller's integration contract (see
:mod:`soc.controller`): ``wbs_*`` (slave), ``wbm_*`` (master), ``irq``; the
clock and reset are Amaranth's ``clk``/``rst``.  The register map is defined
once, here, in :data:`REGS`, and reaches the firmware as ``AFCTRL_REG_*``
constants in LiteX's generated ``soc.h``.
"""

from __future__ import annotations

from amaranth import Module, Signal, Const
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from atomflash import spec
from rtl import spec as layouts

# Block identity: "AFCT" read little-endian, and the placeholder's version.
BLOCK_ID = int.from_bytes(b"AFCT", "little")
BLOCK_VERSION = 0x0000_0001  # major << 16 | minor

# CAPS bits: what this build of the block can do.  The firmware decides from
# these (never from a compile-time guess) whether a NAND controller is there.
CAPS = {
    "IDENTIFY": 0,  # serves the IDENTIFY record at REGS["IDENTIFY"]
    "DMA": 1,       # Wishbone master: DMA_ADDR/DMA_CTRL copy IDENTIFY to memory
    "NAND": 2,      # NAND channels, host queues (the real controller)
}

# DMA_CTRL bits.
DMA = {"START": 0, "BUSY": 0, "DONE": 1, "ERROR": 2}

# Byte offsets in the block's Wishbone window.
REGS = {
    "ID": 0x000,        # RO  BLOCK_ID
    "VERSION": 0x004,   # RO  BLOCK_VERSION
    "SCRATCH": 0x008,   # RW  scratch register, reset 0
    "CAPS": 0x00C,      # RO  CAPS bits
    "DMA_ADDR": 0x010,  # RW  byte address the DMA copies IDENTIFY to (4-byte aligned)
    "DMA_CTRL": 0x014,  # W: bit START; R: BUSY, DONE, ERROR
    "DMA_COUNT": 0x018, # RO  DMA copies completed since reset
    "IDENTIFY": 0x100,  # RO  the IDENTIFY record, spec.IDENTIFY.size bytes
}
WINDOW_BYTES = 0x1000
ADDR_WIDTH = (WINDOW_BYTES // 4 - 1).bit_length()  # word address bits decoded


def identify_fields(*, fw_version: int = 0) -> dict[str, int]:
    """What the placeholder's IDENTIFY reports: the spec's identity and default
    limits, and no NAND (capacity 0, no channels, no geometry).  Nothing here
    claims hardware the build does not have."""
    lim = spec.LIMITS.as_dict()
    return {
        "magic": spec.IDENTIFY_MAGIC,
        "spec_version": spec.SPEC_VERSION,
        "fw_version": fw_version,
        "capacity": 0,
        "lba_size": lim["LBA_SIZE"],
        "max_transfer": lim["MAX_TRANSFER"],
        "max_atomic_pages": lim["MAX_ATOMIC_PAGES"],
        "max_open_tx": lim["MAX_OPEN_TX"],
        "max_pending": lim["MAX_PENDING"],
        "max_remap_triples": lim["MAX_REMAP_TRIPLES"],
        "awupf": lim["MAX_ATOMIC_PAGES"],
        "volatile_cache": 0,
        "channels": 0,
        "ways": 0,
        "luns": 0,
        "queue_depth": lim["QUEUE_DEPTH"],
    }


def identify_words(fields: dict[str, int]) -> list[int]:
    """The record as little-endian 32-bit words, through the Amaranth layout."""
    value = layouts.IDENTIFY.const(fields).as_value().value
    return [(value >> (32 * i)) & 0xFFFF_FFFF for i in range(spec.IDENTIFY.size // 4)]


class IdentifyBlock(wiring.Component):
    """Wishbone (B4 classic, 32-bit, word addresses) slave + master.

    Slave ``wbs_*``: the registers of :data:`REGS`.  Single-cycle decode, one
    wait state (ack the cycle after stb), so it is timing-friendly.
    Master ``wbm_*``: on DMA_CTRL.START writes the IDENTIFY record word by word
    to DMA_ADDR.. (one outstanding access, classic cycles).
    """

    def __init__(self, fields: dict[str, int] | None = None):
        self.fields = identify_fields() if fields is None else fields
        super().__init__({
            "wbs_adr": In(ADDR_WIDTH), "wbs_dat_w": In(32), "wbs_dat_r": Out(32),
            "wbs_sel": In(4), "wbs_cyc": In(1), "wbs_stb": In(1), "wbs_we": In(1),
            "wbs_ack": Out(1), "wbs_err": Out(1),
            "wbm_adr": Out(30), "wbm_dat_w": Out(32), "wbm_dat_r": In(32),
            "wbm_sel": Out(4), "wbm_cyc": Out(1), "wbm_stb": Out(1), "wbm_we": Out(1),
            "wbm_ack": In(1), "wbm_err": In(1),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        words = identify_words(self.fields)
        n_words = len(words)
        m.submodules.rom = rom = Memory(shape=32, depth=n_words, init=words)
        rd = rom.read_port()          # slave reads
        dma_rd = rom.read_port()      # DMA reads

        scratch = Signal(32)
        dma_addr = Signal(30)         # word address
        dma_busy = Signal()
        dma_done = Signal()
        dma_error = Signal()
        dma_count = Signal(32)
        dma_idx = Signal(range(n_words + 1))

        # --- slave -------------------------------------------------------------
        idf_base = REGS["IDENTIFY"] // 4
        adr = self.wbs_adr
        is_idf = (adr >= idf_base) & (adr < idf_base + n_words)
        m.d.comb += rd.addr.eq(adr - idf_base)

        req = self.wbs_cyc & self.wbs_stb & ~self.wbs_ack
        sel_reg = Signal(ADDR_WIDTH)
        sel_idf = Signal()
        m.d.sync += self.wbs_ack.eq(req)
        with m.If(req):
            m.d.sync += [sel_reg.eq(adr), sel_idf.eq(is_idf)]

        def word(name):
            return REGS[name] // 4

        with m.If(sel_idf):
            m.d.comb += self.wbs_dat_r.eq(rd.data)
        with m.Else():
            with m.Switch(sel_reg):
                with m.Case(word("ID")):
                    m.d.comb += self.wbs_dat_r.eq(BLOCK_ID)
                with m.Case(word("VERSION")):
                    m.d.comb += self.wbs_dat_r.eq(BLOCK_VERSION)
                with m.Case(word("SCRATCH")):
                    m.d.comb += self.wbs_dat_r.eq(scratch)
                with m.Case(word("CAPS")):
                    m.d.comb += self.wbs_dat_r.eq((1 << CAPS["IDENTIFY"]) | (1 << CAPS["DMA"]))
                with m.Case(word("DMA_ADDR")):
                    m.d.comb += self.wbs_dat_r.eq(dma_addr << 2)
                with m.Case(word("DMA_CTRL")):
                    m.d.comb += self.wbs_dat_r.eq((dma_busy << DMA["BUSY"]) | (dma_done << DMA["DONE"])
                                                  | (dma_error << DMA["ERROR"]))
                with m.Case(word("DMA_COUNT")):
                    m.d.comb += self.wbs_dat_r.eq(dma_count)

        write = req & self.wbs_we
        with m.If(write & (adr == word("SCRATCH"))):
            for i in range(4):
                with m.If(self.wbs_sel[i]):
                    m.d.sync += scratch[8 * i:8 * i + 8].eq(self.wbs_dat_w[8 * i:8 * i + 8])
        with m.If(write & (adr == word("DMA_ADDR")) & ~dma_busy):
            m.d.sync += dma_addr.eq(self.wbs_dat_w[2:])
        start = write & (adr == word("DMA_CTRL")) & self.wbs_dat_w[DMA["START"]] & ~dma_busy

        # --- master (DMA) ------------------------------------------------------
        m.d.comb += [
            dma_rd.addr.eq(dma_idx),
            self.wbm_adr.eq(dma_addr + dma_idx),
            self.wbm_dat_w.eq(dma_rd.data),
            self.wbm_sel.eq(0b1111),
            self.wbm_we.eq(1),
            self.irq.eq(dma_done),
        ]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(start):
                    m.d.sync += [dma_idx.eq(0), dma_busy.eq(1), dma_done.eq(0), dma_error.eq(0)]
                    m.next = "FETCH"
            with m.State("FETCH"):  # one cycle for the ROM read port
                m.next = "WRITE"
            with m.State("WRITE"):
                m.d.comb += [self.wbm_cyc.eq(1), self.wbm_stb.eq(1)]
                with m.If(self.wbm_err):
                    m.d.sync += [dma_busy.eq(0), dma_error.eq(1)]
                    m.next = "IDLE"
                with m.Elif(self.wbm_ack):
                    with m.If(dma_idx == n_words - 1):
                        m.d.sync += [dma_busy.eq(0), dma_done.eq(1), dma_count.eq(dma_count + 1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += dma_idx.eq(dma_idx + 1)
                        m.next = "FETCH"
        return m
