"""boards.nand_bridge: the NAND controller's Wishbone window (amaranth.sim, a few seconds).

Register read-back, the timing reset value (ONFI mode 0 at the build clock),
page-buffer words' round trips with byte enables on both channels, and a
descriptor pushed to a channel that does not exist: the controller completes
it with BAD_CHANNEL, the completion appears in CPL with the interrupt, and the
fault LED latches until CTRL.CLEAR_FAULT.
"""

from amaranth.sim import Simulator

from atomflash import spec
from atomflash.spec import NandResult
from boards.nand_bridge import CTRL, REGS, STATUS, BLOCK_ID, CPL_WORDS, NandBridge
from rtl.nand.channel import ChannelParams
from rtl.nand.timing import TIMING_NAMES, timing_cycles
from tb.common.simbus import wb_access

CLK = 60_000_000


def test_nand_bridge_registers_buffers_and_bad_channel():
    dut = NandBridge(ChannelParams("small", ways=2, slots=2, ecc=False), 2, clk_hz=CLK, sample=1,
                     led_stretch=16)
    wb = dut.wbs
    sim = Simulator(dut)
    sim.add_clock(1 / CLK)

    async def access(ctx, byte_addr, data=None, sel=0xF):
        return await wb_access(ctx, wb, byte_addr, data, sel, timeout=8)

    async def read_bytes(ctx, byte_addr, words):
        out = b""
        for i in range(words):
            out += (await access(ctx, byte_addr + 4 * i)).to_bytes(4, "little")
        return out

    async def bench(ctx):
        await ctx.tick()
        assert await access(ctx, REGS["ID"]) == BLOCK_ID
        geo = await access(ctx, REGS["GEOMETRY"])
        assert (geo & 0xFF, geo >> 8 & 0xFF, geo >> 16 & 0xFF, geo >> 24 & 1) == (2, 2, 2, 0)
        assert await access(ctx, REGS["SLOT"]) == dut.slot_bytes
        assert dut.slot_bytes == spec.NAND_PROFILES["small"].page_data + spec.NAND_PROFILES["small"].page_spare

        # timing registers: mode 0 at CLK, tSAMPLE = 1
        want = timing_cycles(0, CLK, 1)
        raw = await read_bytes(ctx, REGS["TIMING"], -(-len(TIMING_NAMES) // 4))
        assert {n: raw[i] for i, n in enumerate(TIMING_NAMES)} == want

        # page buffers: both channels, byte enables
        for c in range(2):
            base = dut.buf_base + c * dut.buf_stride + dut.slot_bytes  # slot 1
            await access(ctx, base + 8, 0x11223344 + c)
            await access(ctx, base + 12, 0x55667788 + c)
            await access(ctx, base + 8, 0xAA000000, sel=0b1000)
            # each read follows an access to another word: its ack waits for its own word
            assert await access(ctx, base + 12) == 0x55667788 + c
            assert await access(ctx, base + 8) == 0xAA223344 + c
        assert await access(ctx, dut.buf_base + 8 + dut.slot_bytes) == 0xAA223344

        # a descriptor for channel 5 (does not exist) completes with BAD_CHANNEL
        desc = spec.NAND_DESC.pack(opcode=int(spec.NandOp.READ), channel=5, target=0, tag=0x1234)
        desc += bytes(-len(desc) % 4)
        for i in range(len(desc) // 4):
            await access(ctx, REGS["DESC"] + 4 * i, int.from_bytes(desc[4 * i:4 * i + 4], "little"))
        await access(ctx, REGS["IRQ_EN"], 1)
        assert not ctx.get(dut.irq)
        await access(ctx, REGS["CTRL"], 1 << CTRL["PUSH"])
        for _ in range(20):
            st = await access(ctx, REGS["STATUS"])
            if st >> STATUS["CPL_VALID"] & 1:
                break
        else:
            raise AssertionError("no completion")
        assert not st >> STATUS["DESC_PENDING"] & 1
        assert st >> STATUS["FAULT"] & 1 and ctx.get(dut.led_fault) and ctx.get(dut.irq)
        raw = await read_bytes(ctx, REGS["CPL"], CPL_WORDS)
        cpl = spec.NAND_CPL.unpack(raw[:spec.NAND_CPL.size])
        assert cpl["tag"] == 0x1234 and cpl["result"] == NandResult.BAD_CHANNEL and cpl["channel"] == 5
        await access(ctx, REGS["CTRL"], 1 << CTRL["POP"] | 1 << CTRL["CLEAR_FAULT"])
        st = await access(ctx, REGS["STATUS"])
        assert not st & (1 << STATUS["CPL_VALID"] | 1 << STATUS["FAULT"])
        assert not ctx.get(dut.irq) and not ctx.get(dut.led_fault)
        # every pin idle: CE# high, WE#/RE# high
        for c in range(2):
            assert ctx.get(dut.nand[c].ce_n) == 0b11 and ctx.get(dut.nand[c].we_n) and ctx.get(dut.nand[c].re_n)

    sim.add_testbench(bench)
    sim.run()
