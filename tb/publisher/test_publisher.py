"""rtl/ftl/publisher.py in amaranth.sim against a Python executor, log writer
and map: groups in several slots, members completing in random order with
injected program failures (retried on new pages).  No map write of a group
happens before every member is programmed; the map ends with exactly the
latest bindings; every old binding is rebound away; each group is
published once."""

import random

from amaranth.sim import Simulator

from atomflash.spec import NandResult
from rtl.ftl.mapcache import MapOp
from rtl.ftl.publisher import Publisher

SLOTS, MAXM = 4, 8
UNMAPPED = 0xFFFF_FFFF


class PublisherTB:
    def __init__(self, seed):
        self.dut = Publisher(slots=SLOTS, max_members=MAXM, lba_bits=16)
        self.rng = random.Random(seed)
        self.map = {}                         # the "MapCache"
        self.map_log = []                     # (lba, ppa) in the order written
        self.rebinds = []
        self.published = []
        self.programmed = {}                  # (slot, idx) -> ppa once programmed OK
        self.groups = []                      # (slot, [lba...]) in issue order
        self.next_ppa = 1
        self.retries = 0
        self.violations = []
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.executor)
        self.sim.add_testbench(self.mapcache, background=True)
        self.sim.add_testbench(self.sinks, background=True)

    async def send(self, ctx, port, payload):
        ctx.set(port.payload, payload)
        ctx.set(port.valid, 1)
        await ctx.tick().until(port.ready)
        ctx.set(port.valid, 0)

    async def executor(self, ctx):
        d = self.dut
        rng = self.rng
        for round_ in range(6):
            # open a group in every slot (disjoint LBAs inside a round: the hazard table's job)
            lbas_used = rng.sample(range(40), SLOTS * MAXM)
            batch = []
            for s in range(SLOTS):
                n = rng.randrange(1, MAXM + 1)
                lbas = lbas_used[s * MAXM:s * MAXM + n]
                for i, lba in enumerate(lbas):
                    await self.send(ctx, d.member_lba, {"slot": s, "idx": i, "lba": lba})
                await self.send(ctx, d.open, {"slot": s, "count": n})
                self.groups.append((s, lbas))
                batch += [(s, i) for i in range(n)]
            rng.shuffle(batch)
            while batch:
                s, i = batch.pop()
                ppa = self.next_ppa
                self.next_ppa += 1
                fail = rng.random() < 0.15
                if fail:
                    batch.insert(rng.randrange(len(batch) + 1), (s, i))   # the executor re-issues it later
                    self.retries += 1
                else:
                    self.programmed[(s, i)] = ppa
                await self.send(ctx, d.member, {"slot": s, "idx": i, "ppa": ppa,
                                                "result": NandResult.FAIL if fail else NandResult.OK})
            # wait for this round's groups to be published
            while len(self.published) < (round_ + 1) * SLOTS:
                await ctx.tick()
            self.programmed.clear()

    async def mapcache(self, ctx):
        req, resp = self.dut.map_req, self.dut.map_resp
        ctx.set(req.ready, 1)
        while True:
            _, _, valid, p = await ctx.tick().sample(req.valid, req.payload)
            if not valid:
                continue
            assert p.op == MapOp.WRITE
            # this member's group must be programmed completely
            group = next((s, lbas) for s, lbas in reversed(self.groups) if p.lba in lbas)
            s, lbas = group
            if not all((s, i) in self.programmed for i in range(len(lbas))):
                self.violations.append(("map write before the group was programmed", p.lba))
            old = self.map.get(p.lba, UNMAPPED)
            self.map[p.lba] = p.value
            self.map_log.append((p.lba, p.value))
            ctx.set(req.ready, 0)
            ctx.set(resp.payload, {"old": old, "updated": 1, "hit": 1, "error": 0})
            ctx.set(resp.valid, 1)
            await ctx.tick().until(resp.ready)
            ctx.set(resp.valid, 0)
            ctx.set(req.ready, 1)

    async def sinks(self, ctx):
        d = self.dut
        for port in (d.rebind, d.published, d.retry):
            ctx.set(port.ready, 1)
        while True:
            _, _, rv, rp, pv, pp = await ctx.tick().sample(d.rebind.valid, d.rebind.payload,
                                                          d.published.valid, d.published.payload)
            if rv:
                self.rebinds.append((rp.old.as_bits(), rp.new.as_bits()))
            if pv:
                self.published.append((pp.slot, pp.error))


def test_groups_bind_only_when_complete():
    for seed in range(3):
        tb = PublisherTB(seed)
        tb.sim.run()
        assert tb.violations == []
        assert len(tb.published) == 6 * SLOTS and all(e == 0 for _, e in tb.published)
        assert tb.retries > 0
        # the map holds, per LBA, the member written last; every rebind's old is what the map held
        want, held = {}, {}
        for lba, ppa in tb.map_log:
            want[lba] = ppa
        assert tb.map == want
        for (lba, ppa), (old, new) in zip(tb.map_log, tb.rebinds):
            assert new == ppa and old == held.get(lba, UNMAPPED)
            held[lba] = ppa
        assert len(tb.rebinds) == len(tb.map_log) == sum(len(l) for _, l in tb.groups)
