"""rtl/nvme/regs.py in amaranth.sim, against a model of BAR0 built from ``spec.NVME_REGS``.

``NvmeRegistersTB`` owns the registers and everything around them: a classic-Wishbone initiator
(random idle cycles between accesses, or none: the next access follows the ack at once), a doorbell
sink that takes transfers under random backpressure, the CSTS inputs, and ``BarModel``, the register
file as the spec describes it (every register at its offset, reset 0, behaving as its access type
says).  The random test reads and writes the whole BAR (registers, doorbells of queues that exist and
that do not, holes) with random byte enables: every read must equal the model's, every doorbell
write must come out once and in order, and the outputs must equal the model's after every access.
"""

import gc
import random
import warnings
from collections import Counter

import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from atomflash import spec
from rtl.nvme.regs import NvmeRegisters

REGS = spec.NVME_REGS
DOORBELL_NAMES = ("sq_tail", "cq_head")
# INTMS: writing 1s sets bits of the mask
SETS_MASK = {r.name for r in REGS if r.access == "w1s"}


def bits(register: str, name: str):
    return next(b for b in REGS[register].bits if b.name == name)


def field(register: str, name: str, value: int) -> int:
    b = bits(register, name)
    return value >> b.lsb & (1 << b.width) - 1


def value_of(register: str, **fields: int) -> int:
    return sum(v << bits(register, k).lsb for k, v in fields.items())


def lanes(sel: int) -> int:
    return sum(0xFF << 8 * i for i in range(4) if sel >> i & 1)


class BarModel:
    """BAR0 as ``spec.NVME_REGS`` describes it: reset 0, each register by its access type; doorbells
    only for queues 0..``queues`` (the spec's others are holes)."""

    def __init__(self, *, queues: int, mqes: int, timeout: int):
        self.at = {}                       # byte offset -> (register, index)
        for r in REGS:
            for i in range(queues + 1 if r.name in DOORBELL_NAMES else r.count):
                self.at[r.address(i)] = (r, i)
        self.stored = {r.name: 0 for r in REGS if r.access == "rw"}
        self.int_mask = 0
        self.fixed = {"cap_lo": value_of("cap_lo", mqes=mqes, cqr=1, ams=0, to=timeout),
                      "cap_hi": value_of("cap_hi", dstrd=spec.NVME.DSTRD, nssrs=0, css=1, bps=0, mpsmin=0, mpsmax=0),
                      "vs": spec.NVME.VERSION}
        self.csts_inputs = {b.name: 0 for b in REGS["csts"].bits}
        self.doorbells = []                # (queue, cq, value) of every doorbell written, in order
        self.cc_values = []                # CC after each write of it

    def read(self, offset: int) -> int:
        r, _ = self.at.get(offset, (None, 0))
        if r is None or r.access == "wo":
            return 0
        if r.access == "ro":
            return value_of("csts", **self.csts_inputs) if r.name == "csts" else self.fixed[r.name]
        if r.access in ("w1s", "w1c"):
            return self.int_mask
        return self.stored[r.name]

    def write(self, offset: int, data: int, sel: int) -> None:
        r, i = self.at.get(offset, (None, 0))
        if r is None or r.access == "ro":
            return
        enabled = data & lanes(sel)
        if r.access == "wo":
            value = r.bits[0]
            if lanes(sel) & value.mask:
                self.doorbells.append((i, DOORBELL_NAMES.index(r.name), enabled >> value.lsb & (1 << value.width) - 1))
        elif r.access in ("w1s", "w1c"):
            self.int_mask = self.int_mask | enabled if r.name in SETS_MASK else self.int_mask & ~enabled
        else:
            writable = sum(b.mask for b in r.bits) if r.bits else 0xFFFF_FFFF
            mask = lanes(sel) & writable
            self.stored[r.name] = self.stored[r.name] & ~mask | enabled & mask
            if r.name == "cc":
                self.cc_values.append(self.stored["cc"])

    def outputs(self) -> dict[str, int]:
        s = self.stored
        return {"cc": s["cc"], "aqa": s["aqa"], "asq": s["asq_hi"] << 32 | s["asq_lo"],
                "acq": s["acq_hi"] << 32 | s["acq_lo"], "int_mask": self.int_mask}


class NvmeRegistersTB:
    def __init__(self, *, queues=spec.NVME.IO_QUEUES, mqes=spec.NVME.MQES, timeout=spec.NVME.TIMEOUT_500MS,
                 seed=0, backpressure=0.4, idle=0.5, max_idle=3):
        self.dut = NvmeRegisters(queues=queues, mqes=mqes, timeout=timeout)
        self.model = BarModel(queues=queues, mqes=mqes, timeout=timeout)
        self.rng = random.Random(seed)
        self.backpressure, self.idle, self.max_idle = backpressure, idle, max_idle
        self.hold = False                  # the sink takes nothing while set
        self.taken = []                    # (queue, cq, value) the sink took, in order
        self.cc_pulses = []                # CC in each cycle cc_written was high
        self.seen = Counter()
        self.words = 1 << len(self.dut.bar.adr)
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_process(self.doorbell_sink)
        self.sim.add_process(self.cc_watch)

    # -- around the registers -----------------------------------------------------------------
    async def doorbell_sink(self, ctx):
        db = self.dut.doorbell
        async for _, _, valid, ready, payload in ctx.tick().sample(db.valid, db.ready, db.payload):
            if valid and ready:
                self.taken.append((payload.queue, payload.cq, payload.value))
            self.seen["doorbell_stalls"] += valid and not ready
            ctx.set(db.ready, not self.hold and self.rng.random() >= self.backpressure)

    async def cc_watch(self, ctx):
        async for _, _, pulse, cc in ctx.tick().sample(self.dut.cc_written, self.dut.cc.as_value()):
            if pulse:
                self.cc_pulses.append(cc)

    def set_csts(self, ctx, **values):
        for name, v in values.items():
            ctx.set(getattr(self.dut, name), v)
            self.model.csts_inputs[name] = v

    async def access(self, ctx, offset: int, data: int | None = None, sel: int = 0xF, timeout: int = 200):
        """One Wishbone access (a write when ``data`` is given), after random idle cycles or none; holds
        the bus through the ack cycle, as a classic initiator that sees ack at the clock edge.  Returns
        the read's word and the cycles to the ack."""
        bar = self.dut.bar
        if self.rng.random() < self.idle:
            ctx.set(bar.cyc, 0)
            ctx.set(bar.stb, 0)
            await ctx.tick().repeat(self.rng.randint(1, self.max_idle))
        else:
            self.seen["back_to_back"] += 1
        ctx.set(bar.adr, offset // 4)
        ctx.set(bar.we, data is not None)
        ctx.set(bar.dat_w, self.rng.getrandbits(32) if data is None else data)
        ctx.set(bar.sel, sel)
        ctx.set(bar.cyc, 1)
        ctx.set(bar.stb, 1)
        for cycles in range(1, timeout + 1):
            await ctx.tick()
            assert not ctx.get(bar.err), f"bus error at 0x{offset:x}"
            if ctx.get(bar.ack):
                word = ctx.get(bar.dat_r)
                await ctx.tick()
                assert not ctx.get(bar.ack), f"a second ack at 0x{offset:x}"
                return word, cycles
        raise AssertionError(f"no ack at 0x{offset:x} within {timeout} cycles")

    async def read(self, ctx, offset: int) -> int:
        return (await self.access(ctx, offset))[0]

    async def write(self, ctx, offset: int, data: int, sel: int = 0xF) -> None:
        await self.access(ctx, offset, data, sel)
        self.model.write(offset, data, sel)

    async def release(self, ctx):
        bar = self.dut.bar
        ctx.set(bar.cyc, 0)
        ctx.set(bar.stb, 0)
        await ctx.tick().repeat(4)

    def check_outputs(self, ctx):
        d, want = self.dut, self.model.outputs()
        got = {"cc": ctx.get(d.cc.as_value()), "aqa": ctx.get(d.aqa.as_value()), "asq": ctx.get(d.asq),
               "acq": ctx.get(d.acq), "int_mask": ctx.get(d.int_mask)}
        assert got == want, {k: (hex(got[k]), hex(want[k])) for k in got if got[k] != want[k]}

    # -- the random test ----------------------------------------------------------------------
    def random_offset(self) -> int:
        rng, r = self.rng, self.rng.random()
        if r < 0.45:
            return rng.choice([reg.offset for reg in REGS if reg.count == 1])
        if r < 0.75:                       # every doorbell the spec has, those of no queue here included
            reg = REGS[rng.choice(DOORBELL_NAMES)]
            return reg.address(rng.randrange(reg.count))
        if r < 0.85:                       # next to a register
            return max(0, rng.choice([reg.offset for reg in REGS]) + rng.choice([-4, 4]))
        return 4 * rng.randrange(self.words)

    def random_value(self) -> int:
        return self.rng.choice([self.rng.getrandbits(32)] * 4 + [0, 0xFFFF_FFFF, self.rng.getrandbits(16)])

    async def random_accesses(self, ctx, count: int):
        rng, md = self.rng, self.model
        csts = REGS["csts"].bits
        for _ in range(count):
            if rng.random() < 0.2:
                self.set_csts(ctx, **{b.name: rng.getrandbits(b.width) for b in csts})
            offset = self.random_offset()
            sel = 0xF if rng.random() < 0.6 else rng.randrange(16)
            r = md.at.get(offset, (None, 0))[0]
            kind = r.name if r is not None else "hole"
            if rng.random() < 0.45:
                got, want = await self.read(ctx, offset), md.read(offset)
                assert got == want, f"read 0x{offset:x} ({kind}): 0x{got:08x}, the model 0x{want:08x}"
                self.seen[f"read {kind}"] += 1
                self.seen["nonzero reads"] += want != 0
            else:
                await self.write(ctx, offset, self.random_value(), sel)
                self.seen[f"write {kind}"] += 1
                self.seen["partial writes"] += sel != 0xF
            self.check_outputs(ctx)
            assert self.taken == md.doorbells, (self.taken[-3:], md.doorbells[-3:])
        await self.release(ctx)
        assert self.taken == md.doorbells
        assert self.cc_pulses == md.cc_values


@pytest.mark.parametrize("queues, mqes, timeout, seed", [
    (spec.NVME.IO_QUEUES, spec.NVME.MQES, spec.NVME.TIMEOUT_500MS, 1),
    (3, 1023, 7, 2),
])
def test_random_accesses_follow_the_model_of_the_spec(queues, mqes, timeout, seed):
    tb = NvmeRegistersTB(queues=queues, mqes=mqes, timeout=timeout, seed=seed)

    async def run(ctx):
        await tb.random_accesses(ctx, 4000)

    tb.sim.add_testbench(run)
    tb.sim.run()
    s = tb.seen
    for r in REGS:
        if r.access != "wo":
            assert s[f"read {r.name}"] and s[f"write {r.name}"], (r.name, s)
    for name in DOORBELL_NAMES:
        assert s[f"read {name}"] and s[f"write {name}"] > 50, (name, s)
    assert s["read hole"] > 20 and s["write hole"] > 20, s
    assert s["doorbell_stalls"] > 50 and s["back_to_back"] > 500 and s["partial writes"] > 200, s
    assert s["nonzero reads"] > 500, s
    assert len(tb.taken) > 100 and len({q for q, _, _ in tb.taken}) == queues + 1, len(tb.taken)
    assert len(tb.cc_pulses) > 30


@pytest.mark.parametrize("queues, mqes, timeout", [
    (spec.NVME.IO_QUEUES, spec.NVME.MQES, spec.NVME.TIMEOUT_500MS),
    (1, 0xFFFF, 0xFF),
])
def test_cap_and_vs_by_the_spec_bit_names(queues, mqes, timeout):
    tb = NvmeRegistersTB(queues=queues, mqes=mqes, timeout=timeout)

    async def run(ctx):
        cap_lo, cap_hi, vs = [await tb.read(ctx, REGS[n].offset) for n in ("cap_lo", "cap_hi", "vs")]
        assert {b.name: field("cap_lo", b.name, cap_lo) for b in REGS["cap_lo"].bits} == \
            {"mqes": mqes, "cqr": 1, "ams": 0, "to": timeout}
        assert {b.name: field("cap_hi", b.name, cap_hi) for b in REGS["cap_hi"].bits} == \
            {"dstrd": spec.NVME.DSTRD, "nssrs": 0, "css": 1, "bps": 0, "mpsmin": 0, "mpsmax": 0}
        assert 4 << field("cap_hi", "dstrd", cap_hi) == REGS["cq_head"].offset - REGS["sq_tail"].offset
        assert vs == spec.NVME.VERSION
        assert (field("vs", "mjr", vs), field("vs", "mnr", vs), field("vs", "ter", vs)) == (2, 0, 0)
        # read only: a write changes nothing
        for name in ("cap_lo", "cap_hi", "vs"):
            await tb.write(ctx, REGS[name].offset, 0xFFFF_FFFF ^ tb.model.read(REGS[name].offset))
        assert [await tb.read(ctx, REGS[n].offset) for n in ("cap_lo", "cap_hi", "vs")] == [cap_lo, cap_hi, vs]

    tb.sim.add_testbench(run)
    tb.sim.run()


def test_cc_written_pulses_once_per_cc_write_with_the_new_cc():
    tb = NvmeRegistersTB(seed=5)
    cc = REGS["cc"].offset

    async def run(ctx):
        rng = tb.rng
        await tb.write(ctx, cc, value_of("cc", en=1, iosqes=spec.NVME.SQES, iocqes=spec.NVME.CQES))
        d = tb.dut.cc
        assert (ctx.get(d.en), ctx.get(d.iosqes), ctx.get(d.iocqes), ctx.get(d.shn)) == \
            (1, spec.NVME.SQES, spec.NVME.CQES, 0)
        await tb.write(ctx, cc, value_of("cc", shn=1), sel=0b0010)  # SHN's byte alone: EN stays
        assert (ctx.get(d.en), ctx.get(d.shn), ctx.get(d.iosqes)) == (1, 1, spec.NVME.SQES)
        for _ in range(300):
            offset = rng.choice([cc, cc, REGS["aqa"].offset, REGS["csts"].offset, REGS["intms"].offset,
                                 REGS["sq_tail"].address(0)])
            if rng.random() < 0.7:
                await tb.write(ctx, offset, rng.getrandbits(32), sel=rng.randrange(16))
            else:
                await tb.read(ctx, offset)
        await tb.release(ctx)
        assert len(tb.model.cc_values) > 50
        assert tb.cc_pulses == tb.model.cc_values

    tb.sim.add_testbench(run)
    tb.sim.run()


def test_a_doorbell_held_by_backpressure_is_acked_only_once_taken():
    tb = NvmeRegistersTB(idle=1.0, backpressure=0)
    bar, db = tb.dut.bar, tb.dut.doorbell
    offset, value = REGS["cq_head"].address(2), 0x5A5A_1234

    async def run(ctx):
        tb.hold = True
        await ctx.tick().repeat(2)
        ctx.set(bar.adr, offset // 4)
        ctx.set(bar.dat_w, value)
        ctx.set(bar.sel, 0xF)
        ctx.set(bar.we, 1)
        ctx.set(bar.cyc, 1)
        ctx.set(bar.stb, 1)
        for _ in range(40):
            await ctx.tick()
            assert not ctx.get(bar.ack), "acked before the doorbell was taken"
            assert ctx.get(db.valid)
            p = ctx.get(db.payload)
            assert (p.queue, p.cq, p.value) == (2, 1, 0x1234)
        assert tb.taken == []
        tb.hold = False
        for cycles in range(1, 4):
            await ctx.tick()
            if ctx.get(bar.ack):
                break
        assert ctx.get(bar.ack) and tb.taken == [(2, 1, 0x1234)], (cycles, tb.taken)
        await ctx.tick()                    # the bus held through the ack cycle: no second transfer
        await tb.release(ctx)
        assert tb.taken == [(2, 1, 0x1234)]
        assert await tb.read(ctx, offset) == 0

    tb.sim.add_testbench(run)
    tb.sim.run()


@pytest.mark.parametrize("kw", [dict(mqes=0), dict(mqes=1 << 16), dict(timeout=256),
                                dict(queues=REGS["sq_tail"].count), dict(queues=-1)])
def test_parameters_outside_cap_or_the_doorbells_are_refused(kw):
    with warnings.catch_warnings():
        # the refused object was made before its __init__ raised: amaranth warns when it is collected
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError):
            NvmeRegisters(**kw)
        gc.collect()
