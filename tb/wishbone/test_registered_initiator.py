"""rtl.lib.wishbone.RegisteredInitiator in amaranth.sim.

A TB class plays a bursting initiator the way the core's DMA engines are (a burst of incrementing
accesses whose last is tagged ``CTI_END``, or a classic single access; reads and writes; idle gaps;
sometimes giving a burst up after any answer) against one of two targets behind the stage:

* ``sram``: LiteX's ``wishbone.SRAM`` with ``bursting``, cycle for cycle (its address counter runs on
  every cycle ``stb`` is high in a burst, its ``ack`` is registered), so a stage that presents a wrong
  address, or holds ``stb`` without moving on, reads and writes the wrong words;
* ``classic``: a target with random wait states that ignores ``cti`` and refuses (``err``) every access
  at or above ``ERR_BASE``;
* ``sram_refusing``: the SRAM, refusing every access at or above ``ERR_BASE`` (a burst's words answered
  a cycle apart, some refused: the stage's FIFO holds several, and each answer must be its own word's).

Checked: every read answered returns the word the initiator last wrote there; a write burst is answered
only when all its words are in memory; posted words of a burst given up still land and unacked ones do
not; refused accesses are answered ``err`` exactly when the initiator asks for them; nothing on one
side follows the other side's signals in the same cycle; and against the SRAM, a burst of ``n`` words
takes ``n`` cycles plus a fixed few.
"""

import random

import pytest
from amaranth.sim import Simulator

from rtl.lib.wishbone import CTI_CLASSIC, CTI_END, CTI_INCREMENTING, RegisteredInitiator

ERR_BASE = 0xF0
FULL = 0xF


class RegisteredInitiatorTB:
    def __init__(self, seed: int, target: str, bursts: int = 120, give_up: float = 0.0, max_len: int = 12,
                 gaps: bool = True):
        self.dut = RegisteredInitiator(addr_width=8)
        self.rng, self.target, self.bursts, self.give_up, self.max_len, self.gaps = (
            random.Random(seed), target, bursts, give_up, max_len, gaps)
        self.mem = {}                  # the target's memory
        self.shadow = {}               # what the initiator was answered for
        self.timings = []              # (we, words, cycles from the first request to the last answer)
        self.refusals = 0
        self.refuses = target != "sram"
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.sram if target.startswith("sram") else self.classic, background=True)
        self.sim.add_testbench(self.initiator)

    # -- targets

    async def sram(self, ctx):
        """LiteX's wishbone.SRAM(bursting=True), WRITE_FIRST port, cycle for cycle (``sram_refusing``: an
        access at or above ``ERR_BASE`` is answered ``err`` in its ``ack``'s place and writes nothing)."""
        t = self.dut.target
        ack = latched = counter = 0
        read_adr = 0
        while True:
            await ctx.tick()
            ctx.set(t.dat_r, self.mem.get(read_adr, 0))
            cyc, stb, we, adr, cti = (ctx.get(t.cyc), ctx.get(t.stb), ctx.get(t.we), ctx.get(t.adr), ctx.get(t.cti))
            burst = cti == CTI_INCREMENTING
            port_adr = counter if (burst and latched) else adr
            # an answer is for the word written now, or for the word read out now (fetched a cycle ago)
            refuse = self.refuses and (port_adr if we else read_adr) >= ERR_BASE
            ctx.set(t.ack, ack and not refuse)
            ctx.set(t.err, ack and refuse)
            if cyc and stb and we and not refuse:
                self._write(port_adr, ctx.get(t.dat_w), ctx.get(t.sel))
            read_adr = port_adr
            ack = int(bool(cyc and stb and (not ack or burst)))
            if cyc and stb and burst:
                counter = counter + 1 if latched else adr + (0 if we else 1)
                latched = 1
                if cti == CTI_END:
                    latched = counter = 0
            else:
                latched = counter = 0

    async def classic(self, ctx):
        t, rng = self.dut.target, self.rng
        while True:
            await ctx.tick()
            if ctx.get(t.cyc) and ctx.get(t.stb):
                waits = rng.randrange(3)
                for _ in range(waits):
                    await ctx.tick()
                    assert ctx.get(t.stb), "the stage gave up an access before its answer"
                adr, we = ctx.get(t.adr), ctx.get(t.we)
                refuse = adr >= ERR_BASE
                if we and not refuse:
                    self._write(adr, ctx.get(t.dat_w), ctx.get(t.sel))
                ctx.set(t.dat_r, self.mem.get(adr, 0))
                ctx.set(t.ack if not refuse else t.err, 1)
                await ctx.tick()
                ctx.set(t.ack, 0)
                ctx.set(t.err, 0)

    def _write(self, adr, value, sel):
        old = self.mem.get(adr, 0)
        mask = sum(0xFF << (8 * i) for i in range(4) if sel >> i & 1)
        self.mem[adr] = (old & ~mask) | (value & mask)

    # -- the initiator

    def _no_path_across(self, ctx, bus, t, adr, value):
        """The target's request does not follow the initiator's in the same cycle."""
        before = [ctx.get(getattr(t, n)) for n in ("cyc", "stb", "adr", "we", "dat_w", "sel", "cti")]
        ctx.set(bus.adr, adr ^ 0x55)
        ctx.set(bus.dat_w, 0xDEADBEEF)
        assert [ctx.get(getattr(t, n)) for n in ("cyc", "stb", "adr", "we", "dat_w", "sel", "cti")] == before
        ctx.set(bus.adr, adr)
        ctx.set(bus.dat_w, value)
        answer = (ctx.get(bus.ack), ctx.get(bus.err), ctx.get(bus.dat_r))
        word = ctx.get(t.dat_r)
        ctx.set(t.dat_r, ~word & 0xFFFFFFFF)
        assert (ctx.get(bus.ack), ctx.get(bus.err), ctx.get(bus.dat_r)) == answer
        ctx.set(t.dat_r, word)

    async def initiator(self, ctx):
        bus, t, rng = self.dut.bus, self.dut.target, self.rng
        for _ in range(self.bursts):
            if self.gaps:
                for _ in range(rng.choice([0, 0, 1, 3])):
                    await ctx.tick()
            we = rng.randrange(2)
            classic = rng.random() < 0.2
            n = 1 if classic else rng.randrange(1, self.max_len + 1)
            base = rng.choice([rng.randrange(0, 0x40), rng.randrange(ERR_BASE - 4, 0x100 - n)]
                              if self.refuses else [rng.randrange(0, 0x100 - n)])
            values = [rng.getrandbits(32) for _ in range(n)]
            sel = FULL if rng.random() < 0.8 else rng.randrange(1, 16)
            quit_after = rng.randrange(n) if (self.give_up and rng.random() < self.give_up and n > 1) else None
            ctx.set(bus.cyc, 1)
            ctx.set(bus.stb, 1)
            ctx.set(bus.we, we)
            ctx.set(bus.sel, sel)
            cycles, k, refused = 0, 0, False
            while k < n:
                adr = base + k
                ctx.set(bus.adr, adr)
                ctx.set(bus.dat_w, values[k])
                ctx.set(bus.cti, CTI_CLASSIC if classic else (CTI_INCREMENTING if k < n - 1 else CTI_END))
                self._no_path_across(ctx, bus, t, adr, values[k])
                ack, err = ctx.get(bus.ack), ctx.get(bus.err)
                assert not (ack and err)
                if ack or err:
                    if not we:
                        assert err == (self.refuses and adr >= ERR_BASE), f"read {adr:#x}"
                        if ack:
                            assert ctx.get(bus.dat_r) == self.shadow.get(adr, 0), f"read {adr:#x}"
                    else:
                        if adr < ERR_BASE or not self.refuses:
                            self._answered_write(adr, values[k], sel)
                        refused |= bool(err)
                    k += 1
                await ctx.tick()
                cycles += 1
                assert cycles < 40 * n, "no answer"
                if quit_after is not None and k == quit_after + 1 and k < n:
                    break
            else:
                self.timings.append((we, n, cycles, base))
                if we:
                    # answered only once in memory, and refused if any word was
                    last_word = [self.mem.get(base + i) for i in range(n)]
                    expect = [self.shadow.get(base + i) for i in range(n)]
                    if not self.refuses or base + n <= ERR_BASE:
                        assert last_word == expect and not refused
                    else:
                        assert refused
                        self.refusals += 1
            ctx.set(bus.stb, 0)
            ctx.set(bus.cyc, 0)
            if quit_after is not None:
                # posted words still land; nothing is answered after the answer given ahead of the access
                # that did not come (in this cycle, without stb: ignored)
                await ctx.tick()
                for _ in range(3 * self.dut.depth + 8):
                    assert not ctx.get(bus.ack) and not ctx.get(bus.err)
                    await ctx.tick()
        for _ in range(3 * self.dut.depth + 8):
            await ctx.tick()
        assert {a: v for a, v in self.mem.items() if a < ERR_BASE or not self.refuses} == \
               {a: v for a, v in self.shadow.items() if a < ERR_BASE or not self.refuses}

    def _answered_write(self, adr, value, sel):
        old = self.shadow.get(adr, 0)
        mask = sum(0xFF << (8 * i) for i in range(4) if sel >> i & 1)
        self.shadow[adr] = (old & ~mask) | (value & mask)

    def run(self):
        self.sim.run()
        return self


@pytest.mark.parametrize("seed", range(3))
def test_bursts_through_the_stage_read_and_write_lite_x_bursting_sram(seed):
    RegisteredInitiatorTB(seed, "sram").run()


@pytest.mark.parametrize("seed", range(3))
def test_a_slow_target_and_refusals_answered_where_asked(seed):
    tb = RegisteredInitiatorTB(seed, "classic").run()
    assert tb.refusals


@pytest.mark.parametrize("seed", range(2))
def test_refused_words_in_bursts_answered_a_cycle_apart(seed):
    tb = RegisteredInitiatorTB(seed, "sram_refusing").run()
    assert tb.refusals


@pytest.mark.parametrize("target", ["sram", "classic", "sram_refusing"])
def test_a_burst_given_up_lands_its_posted_words_only(target):
    RegisteredInitiatorTB(7, target, give_up=0.4).run()


def test_a_burst_moves_a_word_a_cycle():
    tb = RegisteredInitiatorTB(3, "sram", bursts=60, max_len=64, gaps=False).run()
    long = [(we, n, c) for we, n, c, _ in tb.timings if n >= 16]
    assert long
    for we, n, cycles in long:
        # a read's first word comes two cycles later than without the stage and a write's answer waits
        # for its last word; a burst right behind another also waits for that one's end on the target
        assert cycles <= n + 6, (we, n, cycles)
    assert min(c - n for we, n, c in long if not we) == 3 and min(c - n for we, n, c in long if we) == 4
