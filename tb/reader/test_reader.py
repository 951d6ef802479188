"""rtl/ftl/reader.py in amaranth.sim: a TB class plays the map (random lookup delays), the NAND
controller (a queue per die, random tR and transfer times longer than a copy, completions in any order across dies,
injected read failures), the channels' page buffers (the read's page lands in its slot), SoC memory
(random wait states) and the host taking completions (random backpressure), and checks every READ
against a reference: its pages in the host buffer as the map named them (zeros where unmapped),
MEDIA_ERROR where a page failed, completions in submission order, one read per die at a time, a
slot never reused before its page was copied out -- and that reads did overlap."""

import random

import pytest
from amaranth.sim import Simulator

from atomflash import spec
from atomflash.spec import NandResult, Status
from rtl.ftl.reader import Reader
from rtl.nand.channel import ChannelParams
from rtl.nand.pagebuf import HOST_READ_LATENCY

# a small page (one ECC codeword, 128 words), so copies are short and the test is about the pipeline
PROFILE = spec.NandProfile("tiny", 512, 128, 4, 16, 1, 0, 0, 0, "test geometry")
C, W, SLOTS = 2, 2, 6
PAGE_WORDS = PROFILE.page_data // 4
SLOT_WORDS = 160


class ReaderTB:
    """Drives a :class:`Reader` cycle by cycle; the models' state lives here."""

    def __init__(self, read_slots: int, seed: int, fail_rate: float = 0.0):
        self.rng = random.Random(seed)
        self.params = ChannelParams(PROFILE, ways=W, slots=SLOTS)
        self.dut = Reader(self.params, C, SLOT_WORDS, queue_pairs=2, read_slots=read_slots, max_transfer=8)
        self.read_slots = read_slots
        self.fail_rate = fail_rate
        self.map = {}                    # lba -> ppa
        self.flash = {}                  # ppa -> list of words
        self.failing = set()             # ppas whose reads fail
        self.mem = {}                    # SoC memory: word address -> word
        self.cmds = []                   # (cid, lba, nlb, buf)
        self.completions = []            # (cid, status)
        self.max_inflight = 0

    def populate(self, lbas: int):
        for lba in range(lbas):
            if self.rng.random() < 0.8:
                ppa = spec.pack_ppa(self.rng.randrange(C), self.rng.randrange(W), 0, self.rng.randrange(16),
                                    self.rng.randrange(4))
                if ppa not in self.flash:
                    self.flash[ppa] = [self.rng.getrandbits(32) for _ in range(PAGE_WORDS)]
                    if self.rng.random() < self.fail_rate:
                        self.failing.add(ppa)
                self.map[lba] = ppa

    def expected(self, lba, nlb):
        status, words = Status.SUCCESS, []
        for i in range(nlb):
            ppa = self.map.get(lba + i)
            if ppa is None:
                words += [0] * PAGE_WORDS
            else:
                words += self.flash[ppa]
                if ppa in self.failing:
                    status = Status.MEDIA_ERROR
        return status, words

    async def run(self, ctx, commands: int, lbas: int, max_cycles: int = 200_000):
        dut, rng = self.dut, self.rng
        for i in range(commands):
            nlb = rng.choice([1, 1, 1, 2, 3, 8])
            self.cmds.append((i, rng.randrange(lbas - nlb), nlb, 0x10000 + i * 8 * PROFILE.page_data))
        sent = 0
        map_resp = []                    # (due, ppa)
        dies = {(c, w): [] for c in range(C) for w in range(W)}   # queued descs: [ready_at, tag, ppa, slot]
        landed = []                      # (tag, result) waiting to be taken
        owner = {}                       # slot tag -> die, from the descriptor until the page landed
        uncopied = {}                    # (channel, slot) -> word offsets the copier has not read yet
        grant_pending = [0] * C
        reads = [[] for _ in range(C)]   # buffer reads on their way: (due, addr)
        bufs = [dict() for _ in range(C)]
        ack_at = None
        cycle = 0
        while len(self.completions) < commands:
            assert cycle < max_cycles, f"stuck: {len(self.completions)} of {commands} completed"
            # -- inputs
            if sent < commands and rng.random() < 0.7:
                cid, lba, nlb, buf = self.cmds[sent]
                ctx.set(dut.cmd.valid, 1)
                ctx.set(dut.cmd.payload, {"sqid": 1, "cid": cid, "lba": lba, "nlb": nlb, "buf": buf, "tx": 0})
            else:
                ctx.set(dut.cmd.valid, 0)
            ctx.set(dut.map.grant, ctx.get(dut.map.lock) & (rng.random() < 0.8))
            ctx.set(dut.map.req.ready, rng.random() < 0.7)
            due = map_resp and map_resp[0][0] <= cycle
            ctx.set(dut.map.resp.valid, bool(due))
            if due:
                ctx.set(dut.map.resp.payload, {"old": map_resp[0][1], "updated": 0, "hit": 1, "error": 0})
            ctx.set(dut.desc.ready, rng.random() < 0.8)
            ctx.set(dut.ncpl.valid, bool(landed))
            if landed:
                ctx.set(dut.ncpl.payload, {"tag": landed[0][0], "result": landed[0][1]})
            for c in range(C):
                ctx.set(dut.buf[c].grant, grant_pending[c])
                r = [a for d, a in reads[c] if d == cycle]
                ctx.set(dut.buf[c].port.r_data, bufs[c].get(r[0], 0) if r else 0)
            ack = ack_at == cycle
            ctx.set(dut.bus.ack, ack)
            ctx.set(dut.cpl.ready, rng.random() < 0.6)
            await ctx.delay(1e-9)
            # -- outputs
            if ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready):
                sent += 1
            if due and ctx.get(dut.map.resp.ready):
                map_resp.pop(0)
            if ctx.get(dut.map.req.valid) and ctx.get(dut.map.req.ready):
                lba = ctx.get(dut.map.req.payload.lba)
                map_resp.append((cycle + rng.randrange(1, 6), self.map.get(lba, spec.PPA_UNMAPPED)))
            if ctx.get(dut.desc.valid) and ctx.get(dut.desc.ready):
                d = ctx.get(dut.desc.payload)
                die = (d.channel, d.target)
                assert die not in owner.values(), f"two reads on die {die}"
                assert d.tag not in owner and (d.channel, d.slot) not in uncopied, \
                    f"slot {d.slot} of channel {d.channel} reused before its page was copied out"
                assert d.tag // self.read_slots == d.channel and d.slot == SLOTS - self.read_slots + d.tag % self.read_slots
                ppa = spec.pack_ppa(d.channel, d.target, d.lun, d.block, d.page)
                owner[d.tag] = die
                dies[die].append([cycle + rng.randrange(100, 600), d.tag, ppa, d.slot, d.channel])
                self.max_inflight = max(self.max_inflight, len(owner))
            if landed and ctx.get(dut.ncpl.ready):
                landed.pop(0)
            for die, q in dies.items():
                if q and q[0][0] <= cycle:
                    ready_at, tag, ppa, slot, c = q.pop(0)
                    for i, word in enumerate(self.flash[ppa]):
                        bufs[c][slot * SLOT_WORDS + i] = word
                    fail = ppa in self.failing
                    landed.append((tag, NandResult.UNCORRECTABLE if fail else NandResult.OK))
                    del owner[tag]                    # the die is free; the slot the reader's until copied
                    if not fail:
                        uncopied[(c, slot)] = set(range(PAGE_WORDS))
            for c in range(C):
                port = dut.buf[c]
                if grant_pending[c] and ctx.get(port.request):
                    addr = ctx.get(port.port.addr)
                    reads[c].append((cycle + HOST_READ_LATENCY, addr))
                    left = uncopied.get((c, addr // SLOT_WORDS))
                    if left is not None:
                        left.discard(addr % SLOT_WORDS)
                        if not left:
                            del uncopied[(c, addr // SLOT_WORDS)]
                    if ctx.get(port.port.w_en):
                        bufs[c][addr] = ctx.get(port.port.w_data)
                reads[c] = [(d, a) for d, a in reads[c] if d > cycle]
                grant_pending[c] = ctx.get(port.request)
            if ack:
                ack_at = None
                if ctx.get(dut.bus.we):
                    self.mem[ctx.get(dut.bus.adr)] = ctx.get(dut.bus.dat_w)
            stb = ctx.get(dut.bus.cyc) and ctx.get(dut.bus.stb)
            if stb and ack_at is None and not ack:
                ack_at = cycle + rng.randrange(1, 3)
            if ctx.get(dut.cpl.valid) and ctx.get(dut.cpl.ready):
                cid, status = ctx.get(dut.cpl.payload.cid), ctx.get(dut.cpl.payload.status)
                self.completions.append((cid, status))
            await ctx.tick()
            cycle += 1
        return cycle

    def check(self):
        assert [cid for cid, _ in self.completions] == [cid for cid, *_ in self.cmds], "completions out of order"
        for (cid, status), (_, lba, nlb, buf) in zip(self.completions, self.cmds):
            want_status, words = self.expected(lba, nlb)
            assert status == want_status, f"command {cid}: status {Status(status).name}, expected {want_status.name}"
            if status == Status.SUCCESS:
                got = [self.mem.get(buf // 4 + i, None) for i in range(len(words))]
                assert got == words, f"command {cid} (lba {lba}, {nlb} pages): wrong data"


def simulate(read_slots: int, seed: int, commands: int = 24, lbas: int = 64, fail_rate: float = 0.0) -> ReaderTB:
    tb = ReaderTB(read_slots, seed, fail_rate)
    tb.populate(lbas)
    out = {}

    async def bench(ctx):
        out["cycles"] = await tb.run(ctx, commands, lbas)

    sim = Simulator(tb.dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    tb.cycles = out["cycles"]
    return tb


@pytest.mark.parametrize("read_slots,seed", [(1, 1), (2, 2)])
def test_reads_against_the_map(read_slots, seed):
    """Random READs (1 to 8 pages, a fifth of the LBAs unmapped) under random delays everywhere: every
    page as the map says, in order; with two read slots per channel reads overlap on all four dies."""
    tb = simulate(read_slots, seed)
    tb.check()
    # one read slot per channel: a read per channel at most; two: more than one on some channel at once
    assert tb.max_inflight == C if read_slots == 1 else tb.max_inflight > C, tb.max_inflight


def test_failed_pages_fail_their_command_only():
    """A page the channel cannot read makes its command MEDIA_ERROR and no other."""
    tb = simulate(2, 3, fail_rate=0.15)
    assert tb.failing
    tb.check()
    assert Status.MEDIA_ERROR in [s for _, s in tb.completions]
    assert Status.SUCCESS in [s for _, s in tb.completions]
