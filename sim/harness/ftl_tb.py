"""cocotb TB for the FTL core: plays the firmware (NAND reset and erase,
free blocks, seq, memory layout) and the host (NVMe-shaped queues in the
harness memory), and reads back what landed on flash."""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, Lock, ReadOnly, RisingEdge

from atomflash import spec
from atomflash.model import Page
from atomflash.nandsim import Image
from atomflash.spec import NandOp, NandResult
from rtl.ftl.allocator import PageAllocator
from rtl.ftl.mapcache import RESPONSE, MapOp, request_layout
from rtl.ftl.relocate import Relocator
from .channel_tb import ChannelTB
from .clock import cycles
from .layouts import pack, unpack
from .streams import StreamSink, StreamSource
from .wishbone import WishboneInitiator

REGS = spec.HOST_REGS

# SoC memory layout (byte addresses): fixed at the bottom, then sized from the
# geometry (FtlCoreTB.__init__): scratch pages, block table, L2P, data buffers
SQ, CQ = 0x0000, 0x0800
IDENTIFY, LOG = 0x1000, 0x1100
SCRATCH = 0x2000                 # slots pages
QUEUE_SIZE = 32
SEQ0 = 1 << 20


class FtlCoreTB:
    def __init__(self, dut, chan: ChannelTB, *, channels, ways, slots, capacity, stalls=0.0):
        self.dut, self.chan = dut, chan
        self.clk = dut.clk
        self.channels, self.ways, self.slots = channels, ways, slots
        self.dies = channels * ways
        self.profile = chan.profile
        self.page = self.profile.page_data
        self.capacity = capacity
        self.block_shift = (self.profile.blocks_per_lun - 1).bit_length()

        def after(addr, size, align=0x1000):
            return (addr + size + align - 1) // align * align
        self.scratch = SCRATCH
        self.block_table = after(self.scratch, slots * self.page)
        self.l2p = after(self.block_table, 4 * (self.dies << self.block_shift))
        self.gc_buf = after(self.l2p, 4 * capacity)   # the relocator's scratch page
        self.data = after(self.gc_buf, self.page)     # host data buffers from here
        self.sq_tail = 0
        self.cq_head = 0
        self.phase = 1
        self.next_cid = 0
        self.outstanding = 0
        self.poll_cycles = 64            # how often the host looks at the CQ
        self.reg_lock = Lock()
        self.regs = WishboneInitiator(dut, "regs", dut.clk)
        self.done: dict[int, dict] = {}
        self.spare_blocks: dict[int, list[int]] = {}
        self.blocks_used: dict[int, list[int]] = {d: [] for d in range(self.dies)}
        self.pool_may_run_dry = False    # a test that starves the core on purpose
        self.stalls = stalls

    @classmethod
    async def create(cls, dut, *, channels, ways, slots, slot_words, capacity, blocks_per_die=24,
                     profile="small", name="ftl", stalls=0.0, **model_cfg):
        """``stalls``: the share of the firmware streams' payloads (free blocks, seq, relocation requests
        in; closed blocks, failed pages, relocation results out) sent after an idle gap or taken late."""
        # a previous test may have left the core mid-operation (a power cut): hold it in reset
        # before the models power on again, so they see no half-finished bus cycle
        dut.rst.value = 1
        await ClockCycles(dut.clk, 8)
        chan = await ChannelTB.create(dut, channels=channels, ways=ways, profile=profile, slot_words=slot_words,
                                      name=name, mode=5, **model_cfg)
        tb = cls(dut, chan, channels=channels, ways=ways, slots=slots, capacity=capacity, stalls=stalls)
        await tb.boot(blocks_per_die)
        return tb

    # -- firmware --------------------------------------------------------------------
    async def boot(self, blocks_per_die):
        d, prof = self.dut, self.profile
        free_layout = PageAllocator(channels=self.channels, ways=self.ways).free.payload.shape()
        self.free_layout = free_layout
        for die in range(self.dies):
            c, w = die % self.channels, die // self.channels
            assert (await self.chan.do(opcode=NandOp.RESET, channel=c, target=w, tag=die)).result == NandResult.OK
        # erase on every die at once (block 0 stays for the firmware)
        first = len(self.chan.cpls)
        for b in range(1, 1 + blocks_per_die):
            for die in range(self.dies):
                await self.chan.submit(opcode=NandOp.ERASE, channel=die % self.channels,
                                       target=die // self.channels, block=b, tag=die)
        cpls = await self.chan.wait_cpls(first + blocks_per_die * self.dies)
        assert all(r.result == NandResult.OK for r in cpls[first:])
        for die in range(self.dies):
            self.spare_blocks[die] = list(range(1, 1 + blocks_per_die))
        self.erased_at_boot = blocks_per_die * self.dies
        d.pages_per_block.value = prof.pages_per_block
        d.capacity.value = self.capacity
        d.l2p_base.value = self.l2p
        d.bt_base.value = self.block_table
        d.block_shift.value = self.block_shift
        d.scratch_base.value = self.scratch
        d.identify_base.value = IDENTIFY
        d.log_base.value = LOG
        d.gc_buf.value = self.gc_buf
        d.no_space.value = 0             # a previous test may have left the core out of space
        d.no_blocks.value = 0
        d.map_lazy.value = 0             # the whole table is in memory: no lazy-load gate
        d.map_seg_set__valid.value = 0
        self.write_words(self.block_table, [0] * (self.dies << self.block_shift))
        # an empty L2P table, and the map cache told so: its block RAM survives a reset
        self.write_words(self.l2p, [spec.PPA_UNMAPPED] * self.capacity)
        await self.map_op(MapOp.INVALIDATE)
        src = dict(idle=self.stalls, max_gap=16)
        sink = dict(backpressure=self.stalls, max_gap=16)
        self.free = StreamSource(d, "free", self.clk, seed=1, **src)
        self.seq_load = StreamSource(d, "seq_load", self.clk, seed=2, **src)
        self.closed = StreamSink(d, "closed", self.clk, seed=3, **sink)
        self.failed = StreamSink(d, "failed", self.clk, seed=4, **sink)   # pages whose program failed
        self.reloc = StreamSource(d, "reloc", self.clk, seed=5, **src)
        self.reloc_done = StreamSink(d, "reloc_done", self.clk, seed=6, **sink)
        await self.seq_load.send(SEQ0)
        for _ in range(min(4, blocks_per_die)):
            for die in range(self.dies):
                await self.give_block(die)
        cocotb.start_soon(self._refill())
        # host queues
        for reg, value in (("sq_base", SQ), ("cq_base", CQ), ("size", QUEUE_SIZE), ("ctrl", 1)):
            await self.reg_write(REGS[reg].address(0), value)
        for i in range(QUEUE_SIZE * spec.CPL.size // 4):
            self.mem_write(CQ // 4 + i, 0)
        cocotb.start_soon(self._poll())

    async def cycles(self, n):
        """About ``n`` clock cycles, for polling (tb.common.clock.cycles: one wake-up, not n)."""
        await cycles(self.clk, n, self.chan.period_ps)

    async def give_block(self, die):
        block = self.spare_blocks[die].pop(0)
        self.blocks_used[die].append(block)
        await self.free.send(pack(self.free_layout, die=die, block=block))

    async def _refill(self):
        """A closed block's die gets the next erased block (the firmware's free pool)."""
        seen = 0
        while True:
            await self.closed.event.wait()
            self.closed.event.clear()
            while seen < len(self.closed.items):
                die = unpack(self.free_layout, self.closed.items[seen])["die"]
                seen += 1
                if not self.spare_blocks[die] and self.pool_may_run_dry:
                    continue
                assert self.spare_blocks[die], "the test ran out of erased blocks"
                await self.give_block(die)

    async def relocate(self, ppa, tag=1, lba=None) -> dict:
        """The GC hook: relocate page ``ppa`` (rebinding ``lba`` when given, as for a remapped append page);
        returns {tag, result, new_ppa}."""
        n = len(self.reloc_done.items)
        await self.reloc.send(pack(Relocator.req_layout(), ppa=ppa, tag=tag, lba=lba or 0, by_lba=lba is not None))
        while len(self.reloc_done.items) <= n:
            await self.cycles(64)
        return unpack(Relocator.done_layout(), self.reloc_done.items[n])

    async def map_op(self, op, lba=0, value=0, expected=0) -> dict:
        """One request on the firmware's map-cache port (lock, request, response, unlock)."""
        d = self.dut
        d.map_fw__lock.value = 1
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            if int(d.map_fw__grant.value):
                break
        await FallingEdge(self.clk)
        sink = StreamSink(d, "map_fw__resp", self.clk) if not hasattr(self, "_map_resp") else self._map_resp
        self._map_resp = sink
        n = len(sink.items)
        await StreamSource(d, "map_fw__req", self.clk).send(
            pack(request_layout(32), op=op.value, lba=lba, value=value, expected=expected))
        while len(sink.items) <= n:
            await ClockCycles(self.clk, 8)
        d.map_fw__lock.value = 0
        return unpack(RESPONSE, sink.items[n])

    # -- memory and registers -------------------------------------------------------------
    def mem_write(self, word, value):
        self.dut.mem[word].value = value

    def mem_read(self, word) -> int:
        return int(self.dut.mem[word].value)

    def write_words(self, addr, words):
        for i, w in enumerate(words):
            self.mem_write(addr // 4 + i, w)

    def write_bytes(self, addr, data: bytes):
        assert addr % 4 == 0 and len(data) % 4 == 0
        self.write_words(addr, [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)])

    def read_bytes(self, addr, n) -> bytes:
        return b"".join(self.mem_read(addr // 4 + i).to_bytes(4, "little") for i in range(n // 4))

    async def reg_write(self, addr, value):
        # the submitter and the CQ poller both ring doorbells: one register access at a time
        async with self.reg_lock:
            await self.regs.write(addr, value)

    # -- host commands ---------------------------------------------------------------------
    async def submit(self, **fields) -> int:
        """Write a CMD into the SQ and ring the doorbell; returns its cid."""
        while self.outstanding >= QUEUE_SIZE - 1:      # the rings hold size - 1 entries
            await self.cycles(200)
        cid = self.next_cid
        self.next_cid = (self.next_cid + 1) & 0xFFFF
        fields = dict(nsid=1, cid=cid) | fields
        self.outstanding += 1
        self.write_bytes(SQ + self.sq_tail * spec.CMD.size, spec.CMD.pack(fields))
        self.sq_tail = (self.sq_tail + 1) % QUEUE_SIZE
        await self.reg_write(REGS["sq_tail"].address(0), self.sq_tail)
        return cid

    async def _poll(self):
        while True:
            await self.cycles(self.poll_cycles)
            while True:
                base = CQ + self.cq_head * spec.CPL.size
                w3 = self.mem_read(base // 4 + 3)
                if (w3 >> 16) & 1 != self.phase:
                    break
                cpl = spec.CPL.unpack(self.read_bytes(base, spec.CPL.size))
                self.done[cpl.cid] = dict(status=cpl.sf >> 1, result=cpl.result, cycle=int(self.dut.cycle.value))
                self.outstanding -= 1
                self.cq_head = (self.cq_head + 1) % QUEUE_SIZE
                if self.cq_head == 0:
                    self.phase ^= 1
                await self.reg_write(REGS["cq_head"].address(0), self.cq_head)

    async def wait(self, cid, timeout_cycles=20_000_000) -> dict:
        deadline = int(self.dut.cycle.value) + timeout_cycles
        while cid not in self.done:
            await self.cycles(self.poll_cycles)
            assert int(self.dut.cycle.value) < deadline, f"command {cid} never completed"
        return self.done.pop(cid)

    async def do(self, **fields) -> dict:
        return await self.wait(await self.submit(**fields))

    async def run_queue(self, commands, depth) -> tuple[int, list, list[int]]:
        """Submit ``commands`` (CMD field dicts) in order keeping ``depth`` in flight; returns the
        cycles from the first submission to the last completion, the statuses, and each completion's
        cycle counted from the first submission (in the order they were collected)."""
        start = int(self.dut.cycle.value)
        inflight, statuses, done = [], [], []

        def collect(r):
            statuses.append(r["status"])
            done.append(r["cycle"] - start)
        for c in commands:
            while len(inflight) >= depth:
                await self.cycles(self.poll_cycles)
                for cid in [k for k in inflight if k in self.done]:
                    collect(self.done.pop(cid))
                    inflight.remove(cid)
            inflight.append(await self.submit(**c))
        for cid in inflight:
            collect(await self.wait(cid))
        return int(self.dut.cycle.value) - start, statuses, done

    # -- flash ------------------------------------------------------------------------------
    def flash_pages(self, trust_torn: bool = True) -> list[Page]:
        """Every programmed page of the blocks handed out, as ``recover`` takes them.
        ``trust_torn=False``: a page a power cut interrupted (or damaged through its MLC
        upper page) counts as unreadable (what an ECC read of it gives), its OOB zeros."""
        lay, prof = self.chan.layout, self.profile
        pages = []
        for die in range(self.dies):
            c, w = die % self.channels, die // self.channels
            with Image(self.chan.cfg[self.chan.index(c, w)]["image"]) as img:
                for block in self.blocks_used[die]:
                    for p in range(prof.pages_per_block):
                        spare = img.spare(0, block, p)
                        data = img.data(0, block, p)
                        if data == b"\xff" * prof.page_data and spare == b"\xff" * prof.page_spare:
                            continue
                        oob = bytes(spare[lay.oob_record_col - prof.page_data:][:spec.OOB.size])
                        state = img.page_state(0, block, p)
                        if not trust_torn and (state.torn or state.paired_damage):
                            oob = bytes(spec.OOB.size)
                        ppa = spec.pack_ppa(c, w, 0, block, p)
                        pages.append(Page(addr=ppa, oob=oob, data=bytes(data)))
        return pages
