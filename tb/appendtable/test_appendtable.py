"""rtl/ftl/appendtable.py in amaranth.sim: a TB class plays the executor (an append's first page,
its token, REMAP/RELEASE accepted) and the publisher (dropped, freed) at random, and checks the
table against a reference model: free slots, live and held bits, each slot's first vseq and meta,
the tokens (``atomflash.spec.token_check`` computes the check: SipHash-2-4 under the table's key, over
the append's first vseq, slot, generation and owner) and the floor after two scanner passes."""

import random

import pytest
from amaranth.sim import Simulator

from atomflash import spec
from rtl.ftl.appendtable import AppendTable
from rtl.ftl.floorscan import NONE


# after the mint request's cycle: SipHash-2-4 of TOKEN_MAC_IN's two words (25 cycles from the first
# word's transfer to the digest's, rtl/lib/siphash.py), then the token
MINT_CYCLES = 25


class AppendModel:
    def __init__(self, slots: int):
        self.live, self.held = [0] * slots, [0] * slots
        self.first = [0] * slots
        self.meta = [(0, 0, 0, 0)] * slots       # gen, nlb, check, owner

    @property
    def floor(self):
        return min((f for f, h in zip(self.first, self.held) if h), default=NONE)


class AppendTableTB:
    OWNER_BITS = 3

    def __init__(self, slots: int, seed: int, operations: int = 200):
        self.dut = AppendTable(slots, owner_bits=self.OWNER_BITS)
        self.model = AppendModel(slots)
        self.slots, self.rng, self.operations = slots, random.Random(seed), operations
        self.key = self.rng.randbytes(16)
        self.seen = {"minted": 0, "consumed": 0, "dropped": 0, "freed": 0, "full": 0, "reused": 0}
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.run)

    async def read(self, ctx, slot):
        """Slot ``slot`` through the read port; the view port, looking at the same slot, must agree."""
        d = self.dut
        ctx.set(d.read_addr, slot)
        ctx.set(d.view.slot, slot)
        assert (ctx.get(d.view.live), ctx.get(d.view.held)) == (self.model.live[slot], self.model.held[slot])
        await ctx.tick()
        meta, seen = ctx.get(d.read_meta), ctx.get(d.view.meta)
        assert (ctx.get(d.view.first), seen.gen, seen.nlb, seen.check) == \
            (ctx.get(d.read_first), meta.gen, meta.nlb, meta.check)
        return ctx.get(d.read_first), (meta.gen, meta.nlb, meta.check, meta.owner), ctx.get(d.next_gen)

    async def check(self, ctx):
        d, md = self.dut, self.model
        assert ctx.get(d.live) == sum(b << i for i, b in enumerate(md.live))
        assert ctx.get(d.held) == sum(b << i for i, b in enumerate(md.held))
        await ctx.tick()                  # the free slot is registered: a cycle behind held
        assert ctx.get(d.has_free) == (0 in md.held)
        if 0 in md.held:
            assert ctx.get(d.free_slot) == md.held.index(0)
        for slot in range(self.slots):
            first, meta, next_gen = await self.read(ctx, slot)
            if md.held[slot] or md.meta[slot][0]:
                assert (first, meta) == (md.first[slot], md.meta[slot]), slot
            gen = md.meta[slot][0]
            assert next_gen == (1 if gen >= 0xFFFF else gen + 1)
        passes = ctx.get(d.floor_passes)
        while ctx.get(d.floor_passes) < passes + 2:
            await ctx.tick()
        assert ctx.get(d.floor) == md.floor

    async def append(self, ctx, vseq):
        d, md, rng = self.dut, self.model, self.rng
        if 1 not in [1 - h for h in md.held]:
            self.seen["full"] += 1
            return
        slot = md.held.index(0)
        _, (gen, _, _, _), next_gen = await self.read(ctx, slot)
        self.seen["reused"] += gen != 0
        ctx.set(d.hold, 1)
        ctx.set(d.hold_slot, slot)
        ctx.set(d.hold_first, vseq)
        await ctx.tick()
        ctx.set(d.hold, 0)
        md.held[slot], md.first[slot] = 1, vseq
        nlb, owner = rng.randrange(1, 9), rng.randrange(1 << self.OWNER_BITS)
        for name, v in (("mint_slot", slot), ("mint_gen", next_gen), ("mint_first", vseq), ("mint_nlb", nlb),
                        ("mint_owner", owner)):
            ctx.set(getattr(d, name), v)
        ctx.set(d.mint, 1)
        await ctx.tick()
        ctx.set(d.mint, 0)
        cycles = 0
        while not ctx.get(d.minted):
            await ctx.tick()
            cycles += 1
        assert cycles == MINT_CYCLES
        token = ctx.get(d.token)
        assert token.as_value().value == spec.make_token(slot, next_gen, vseq, owner=owner, key=self.key)
        check = spec.token_check(self.key, slot, next_gen, vseq, owner)
        # the old check, a CRC anyone can compute, is not what the table mints
        assert check != spec.crc32(spec.TOKEN_MAC_IN.pack(first_vseq=vseq, handle=slot, gen=next_gen))
        assert not ctx.get(d.live) >> slot & 1             # live from the next cycle
        await ctx.tick()
        md.live[slot], md.meta[slot] = 1, (next_gen, nlb, check, owner)
        self.seen["minted"] += 1

    async def pulse(self, ctx, strobe, port, slot):
        ctx.set(getattr(self.dut, strobe), 1)
        ctx.set(getattr(self.dut, port), slot)
        await ctx.tick()
        ctx.set(getattr(self.dut, strobe), 0)

    async def run(self, ctx):
        md, rng = self.model, self.rng
        ctx.set(self.dut.key, int.from_bytes(self.key, "little"))
        vseq = 1000
        await self.check(ctx)
        for _ in range(self.operations):
            op = rng.choice(["append", "append", "consume", "dropped", "freed", "freed"])
            live = [s for s in range(self.slots) if md.live[s]]
            held_dead = [s for s in range(self.slots) if md.held[s] and not md.live[s]]
            if op == "append":
                vseq += rng.randrange(1, 100)
                await self.append(ctx, rng.choice([vseq, rng.randrange(1 << 63)]))
            elif op == "consume" and live:
                slot = rng.choice(live)
                await self.pulse(ctx, "consume", "consume_slot", slot)
                md.live[slot] = 0
                self.seen["consumed"] += 1
            elif op == "dropped" and live:
                slot = rng.choice(live)
                await self.pulse(ctx, "dropped", "dropped_slot", slot)
                assert ctx.get(self.dut.live) >> slot & 1        # not live from the next cycle
                await ctx.tick()
                md.live[slot] = 0
                self.seen["dropped"] += 1
            elif op == "freed" and held_dead:
                slot = rng.choice(held_dead)
                await self.pulse(ctx, "freed", "freed_slot", slot)
                md.held[slot] = 0
                self.seen["freed"] += 1
            await self.check(ctx)


@pytest.mark.parametrize("slots", [1, 3, 8])
def test_the_table_follows_the_model_under_random_appends_remaps_and_publications(slots):
    tb = AppendTableTB(slots, seed=slots)
    tb.sim.run()
    assert all(tb.seen[k] > 0 for k in ("minted", "consumed", "dropped", "freed", "full", "reused")), tb.seen


def test_the_generation_after_0xffff_is_1_never_0():
    """Generation 0 is never given: it is every slot's meta before its first append."""
    dut = AppendTable(2)

    async def run(ctx):
        for gen, expected in ((0xFFFE, 0xFFFF), (0xFFFF, 1)):
            ctx.set(dut.mint_slot, 1)
            ctx.set(dut.mint_gen, gen)
            ctx.set(dut.mint, 1)
            await ctx.tick()
            ctx.set(dut.mint, 0)
            while not ctx.get(dut.minted):
                await ctx.tick()
            await ctx.tick()
            ctx.set(dut.read_addr, 1)
            await ctx.tick()
            assert ctx.get(dut.read_meta).gen == gen and ctx.get(dut.next_gen) == expected

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(run)
    sim.run()
