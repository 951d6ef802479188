"""soc.ftl_bridge: the FTL core's window in the SoC (amaranth.sim; the NAND
pins idle, SoC memory a Python dictionary behind the core's initiator).

Checks the decode (host queue registers, FTL registers, the NAND window, a
hole answering 0), the FTL registers' read-back and write guards, the
mailboxes (a free block and a seq load taken by the allocator; the map port
writing and reading an L2P entry through the cache, the answer and the
hit/miss counters), and the firmware's page-buffer slot through the
arbitrated buffer port.
"""

from amaranth.sim import Simulator

from atomflash import spec
from rtl.nand.window import BLOCK_ID, REGS as NAND_REGS
from soc.ftl_bridge import FTL_OFFSET, FtlBridge
from tb.common.simbus import wb_access

CLK = 60_000_000
FTL = spec.FTL_REGS


def _field(reg, name, value):
    b = next(b for b in FTL[reg].bits if b.name == name)
    return (value >> b.lsb) & ((1 << b.width) - 1)


class BridgeTB:
    """Wishbone accesses to the window and a word-addressed SoC memory."""

    def __init__(self, dut: FtlBridge):
        self.dut = dut
        self.wbs = dut._flat("wbs_")
        self.wbm = dut._flat("wbm_")
        self.mem: dict[int, int] = {}

    async def memory(self, ctx):
        """Answers the core's initiator one cycle after each request."""
        wbm = self.wbm
        acked = False
        while True:
            await ctx.tick()
            if acked:
                ctx.set(wbm.ack, 0)
                acked = False
                continue
            if ctx.get(wbm.cyc) and ctx.get(wbm.stb):
                adr = ctx.get(wbm.adr)
                if ctx.get(wbm.we):
                    old = self.mem.get(adr, 0xFFFF_FFFF)
                    sel = ctx.get(wbm.sel)
                    mask = sum(0xFF << (8 * i) for i in range(4) if sel >> i & 1)
                    self.mem[adr] = (old & ~mask) | (ctx.get(wbm.dat_w) & mask)
                ctx.set(wbm.dat_r, self.mem.get(adr, 0xFFFF_FFFF))
                ctx.set(wbm.ack, 1)
                acked = True

    async def access(self, ctx, byte_addr, data=None):
        return await wb_access(ctx, self.wbs, byte_addr, data)

    async def ftl(self, ctx, reg, data=None):
        return await self.access(ctx, FTL_OFFSET + FTL[reg].offset, data)

    async def wait_status(self, ctx, bit, value, cycles=2000):
        for _ in range(cycles):
            if _field("status", bit, await self.ftl(ctx, "status")) == value:
                return
        raise AssertionError(f"status.{bit} stayed {1 - value}")


def test_ftl_bridge_window():
    dut = FtlBridge(clk_hz=CLK, sample=2, profile="small", channels=2, ways=1, nand_slots=4, slots=4,
                    map_sets=4, map_ways=2)
    tb = BridgeTB(dut)
    sim = Simulator(dut)
    sim.add_clock(1 / CLK)
    sim.add_testbench(tb.memory, background=True)

    async def bench(ctx):
        await ctx.tick()
        # decode
        assert await tb.access(ctx, spec.HOST_REGS["id"].offset) == 0   # host interface off until enabled
        await tb.ftl(ctx, "host_enable", 1)
        assert await tb.access(ctx, spec.HOST_REGS["id"].offset) == spec.HOST_REGS_ID
        assert await tb.ftl(ctx, "id") == spec.FTL_REGS_ID
        assert await tb.access(ctx, dut.nand_offset + NAND_REGS["ID"]) == BLOCK_ID
        assert await tb.access(ctx, dut.nand_offset + NAND_REGS["FW_SLOT"]) == dut.core.fw_slot
        assert await tb.access(ctx, 0x200) == 0          # a hole
        geo = await tb.ftl(ctx, "geometry")
        assert [_field("geometry", f, geo) for f in ("channels", "ways", "queue_pairs", "fw_slot")] == \
            [2, 1, 1, dut.core.fw_slot]

        assert await tb.ftl(ctx, "scratch_pages") == dut.core.slots
        assert await tb.ftl(ctx, "free_depth") == dut.core.alloc.free_depth
        # the transaction and append limits of the build; nothing open, so no floor
        lim = await tb.ftl(ctx, "tx_limits")
        assert (_field("tx_limits", "max_open_tx", lim), _field("tx_limits", "max_pending", lim)) == \
            (dut.core.max_open_tx, dut.core.max_pending)
        app = await tb.ftl(ctx, "append_limits")
        assert (_field("append_limits", "max_appends", app), _field("append_limits", "max_remap_triples", app)) == \
            (dut.core.max_appends, spec.LIMITS.MAX_REMAP_TRIPLES)
        st = await tb.ftl(ctx, "tx_status")
        assert _field("tx_status", "open", st) == 0
        passes = await tb.ftl(ctx, "floor_passes")
        for _ in range(3 * dut.core.max_appends):
            await ctx.tick()
        assert await tb.ftl(ctx, "floor_passes") > passes
        assert (await tb.ftl(ctx, "tx_floor_lo"), await tb.ftl(ctx, "tx_floor_hi")) == (0xFFFF_FFFF, 0xFFFF_FFFF)
        # no write cache in this build: its counters stay 0
        assert [await tb.ftl(ctx, r) for r in ("cache_pages", "cache_in", "cache_coalesced", "cache_destaged",
                                              "cache_stripes", "cache_dirty")] == [dut.core.cache_pages] + [0] * 5
        # nothing read, written or issued to the NAND yet: the activity counters read 0
        assert [await tb.ftl(ctx, r) for r in ("host_read_pages", "host_write_pages", "record_pages", "nand_reads",
                                              "nand_programs", "nand_erases")] == [0] * 6
        await tb.ftl(ctx, "cache_base", 0x8000)
        assert await tb.ftl(ctx, "cache_base") == 0x8000
        # plain registers read back; ro ones ignore writes
        await tb.ftl(ctx, "l2p_base", 0x1000)
        await tb.ftl(ctx, "pages_per_block", 64)
        assert await tb.ftl(ctx, "l2p_base") == 0x1000
        await tb.ftl(ctx, "id", 0)
        assert await tb.ftl(ctx, "id") == spec.FTL_REGS_ID

        # free block and seq: the allocator takes them, so the pending bits clear
        status = await tb.ftl(ctx, "status")
        assert _field("status", "starved", status) == 1
        await tb.ftl(ctx, "free", 1 << 16 | 7)           # die 1, block 7
        await tb.wait_status(ctx, "free_pending", 0)
        await tb.ftl(ctx, "seq_lo", 0x1234)
        await tb.ftl(ctx, "seq_hi", 1)
        await tb.ftl(ctx, "ctrl", spec.FTL_REGS["ctrl"].bits[2].mask)   # load_seq
        await tb.wait_status(ctx, "seq_pending", 0)
        assert (await tb.ftl(ctx, "seq_next_lo"), await tb.ftl(ctx, "seq_next_hi")) == (0x1234, 1)

        # map port: WRITE lba 3 (a miss: line fill), then READ it (a hit)
        ctrl_go = next(b for b in FTL["ctrl"].bits if b.name == "map_go").mask
        await tb.ftl(ctx, "map_op", spec.MapFwOp.WRITE)
        await tb.ftl(ctx, "map_lba", 3)
        await tb.ftl(ctx, "map_value", 0xABCD)
        await tb.ftl(ctx, "ctrl", ctrl_go)
        await tb.ftl(ctx, "map_lba", 9)                  # ignored: the request is in flight (or done already)
        await tb.wait_status(ctx, "map_done", 1)
        res = await tb.ftl(ctx, "map_result")
        assert (_field("map_result", "updated", res), _field("map_result", "error", res)) == (1, 0)
        assert await tb.ftl(ctx, "map_old") == spec.PPA_UNMAPPED
        await tb.ftl(ctx, "map_op", spec.MapFwOp.READ)
        await tb.ftl(ctx, "map_lba", 3)
        await tb.ftl(ctx, "ctrl", ctrl_go)
        await tb.wait_status(ctx, "map_done", 1)
        assert await tb.ftl(ctx, "map_old") == 0xABCD
        assert _field("map_result", "hit", await tb.ftl(ctx, "map_result")) == 1
        assert (await tb.ftl(ctx, "map_hits"), await tb.ftl(ctx, "map_misses")) == (1, 1)
        # FLUSH writes the dirty line back to the table in memory
        await tb.ftl(ctx, "map_op", spec.MapFwOp.FLUSH)
        await tb.ftl(ctx, "ctrl", ctrl_go)
        await tb.wait_status(ctx, "map_done", 1)
        assert tb.mem[0x1000 // 4 + 3] == 0xABCD

        # the lazy-load gate: segments of 8 LBAs; LBA 40's (segment 5) not in memory, so a READ of it waits,
        # names the segment in map_fault, and goes on once map_seg marks it loaded
        bit = {b.name: b for r in ("map_lazy", "map_seg") for b in FTL[r].bits}
        assert await tb.ftl(ctx, "map_segments") == dut.core.map_segments
        await tb.ftl(ctx, "map_seg", 5)                                  # not loaded
        on = bit["enable"].mask | 3 << bit["seg_shift"].lsb
        await tb.ftl(ctx, "map_lazy", on)
        assert await tb.ftl(ctx, "map_lazy") == on
        await tb.ftl(ctx, "map_op", spec.MapFwOp.READ)
        await tb.ftl(ctx, "map_lba", 40)
        await tb.ftl(ctx, "ctrl", ctrl_go)
        for _ in range(50):
            await ctx.tick()
        fault = await tb.ftl(ctx, "map_fault")
        assert (_field("map_fault", "waiting", fault), _field("map_fault", "index", fault)) == (1, 5)
        assert _field("status", "map_done", await tb.ftl(ctx, "status")) == 0
        tb.mem[0x1000 // 4 + 40] = 0x4040                                  # the firmware loads the segment ...
        await tb.ftl(ctx, "map_seg", 5 | bit["loaded"].mask)            # ... and says so
        await tb.wait_status(ctx, "map_done", 1)
        assert await tb.ftl(ctx, "map_old") == 0x4040
        assert _field("map_fault", "waiting", await tb.ftl(ctx, "map_fault")) == 0
        assert await tb.ftl(ctx, "map_faults") == 1
        await tb.ftl(ctx, "map_lazy", 0)

        # the firmware's slot on channel 1, through the arbiter
        slot = dut.core.fw_slot
        base = dut.nand_offset + dut.window.buf_base + dut.window.buf_stride + slot * dut.window.slot_bytes
        await tb.access(ctx, base + 8, 0xC0FFEE11)
        assert await tb.access(ctx, base + 8) == 0xC0FFEE11
        await tb.access(ctx, base + 8 - dut.window.buf_stride, 0x55)   # channel 0: its own RAM
        assert await tb.access(ctx, base + 8) == 0xC0FFEE11
        assert await tb.access(ctx, base + 8 - dut.window.buf_stride) == 0x55

    sim.add_testbench(bench)
    sim.run()
