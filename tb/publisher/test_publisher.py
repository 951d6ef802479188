"""rtl/ftl/publisher.py in amaranth.sim against a Python executor, log writer
and map: groups in several slots with overlapping LBAs (and trims, which unbind a
range once their record is programmed), members completing in random order with injected program failures (retried on new pages, keeping
their vseq), some groups given up (some of those because a member's host buffer gave a
bus error or the log writer found it no page, which the publisher notes per
slot) and some empty (FLUSH).  Members come in as the log writer's
completions (PAGE_DONE, tagged with slot and index).  No map write of a
group happens before every member is programmed or while the map port is not
granted; groups are published in open order, so the map ends with the
bindings of the last-opened group per LBA; dropped groups bind nothing;
every old binding is rebound away; each group is published once."""

import random

from amaranth.sim import Simulator

from atomflash.spec import NandResult
from rtl.ftl.mapcache import MapOp
from rtl.spec import PPA
from rtl.ftl.publisher import Publisher

SLOTS, MAXM = 4, 8
UNMAPPED = 0xFFFF_FFFF


class PublisherTB:
    def __init__(self, seed):
        self.dut = Publisher(slots=SLOTS, max_members=MAXM, lba_bits=16)
        self.rng = random.Random(seed)
        self.note_rng = random.Random(seed + 1000)   # the per-slot notes' draws, apart from the groups'
        self.map = {}                         # the "MapCache"
        self.map_log = []                     # (lba, ppa) in the order written
        self.rebinds = []
        self.published = []
        self.programmed = {}                  # (slot, idx) -> ppa once programmed OK
        self.groups = []                      # (slot, [lba...]) in issue order
        self.next_ppa = 1
        self.retries = 0
        self.violations = []
        self.notes = [[0, 0] for _ in range(SLOTS)]   # per slot: transfer_error, no_page
        self.noted = {"dma_error": 0, "no_page": 0, "open_no_page": 0}
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
            # open a group in every slot, in ring order; LBAs overlap between groups
            batch = []
            for s in range(SLOTS):
                # every run has an empty group (FLUSH) and a group given up
                n = 0 if (round_, s) == (1, 2) else rng.choice([0, 1] + list(range(1, MAXM + 1)))
                # some are trims: one member (the TRIM record) unbinding a range
                trim = n > 0 and (rng.random() < 0.2 or (round_, s) == (3, 0))
                if trim:
                    first, nlb = rng.randrange(10), rng.randrange(1, 4)
                    lbas, n = list(range(first, first + nlb)), 1
                    await self.send(ctx, d.member_lba, {"slot": s, "idx": 0, "lba": first})
                    await self.open(ctx, {"slot": s, "count": 1, "trim_nlb": nlb})
                else:
                    lbas = rng.sample(range(12), n)
                    for i, lba in enumerate(lbas):
                        await self.send(ctx, d.member_lba, {"slot": s, "idx": i, "lba": lba})
                    await self.open(ctx, {"slot": s, "count": n, "trim_nlb": 0})
                give_up = n > 0 and (rng.random() < 0.2 or (round_, s) == (2, 1))
                self.groups.append((s, lbas, give_up, trim))
                batch += [(s, i, give_up and i == 0, 100 * s + i) for i in range(n)]
            rng.shuffle(batch)
            while batch:
                s, i, give_up, vseq = batch.pop()
                ppa = self.next_ppa
                self.next_ppa += 1
                fail = give_up or rng.random() < 0.15
                if fail:
                    self.retries += 1
                else:
                    self.programmed[(s, i)] = ppa
                member = {"tag": s << self.dut.idx_bits | i, "ppa": PPA.from_bits(ppa), "vseq": vseq,
                          "result": NandResult.FAIL if fail else NandResult.OK}
                why = self.note_rng.choice([None, "dma_error", "no_page"]) if give_up else None
                if why:             # the reason the executor gives this member up
                    member[why] = 1
                    self.notes[s][why == "no_page"] = 1
                    self.noted[why] += 1
                if fail:
                    # the publisher sends it back with its vseq, in the cycle it takes the member
                    r = await self.retried(ctx, member)
                    assert (r.slot, r.idx, r.vseq) == (s, i, vseq)
                else:
                    await self.send(ctx, d.member, member)
                self.check_notes(ctx)
                if fail:
                    if give_up:
                        await self.send(ctx, d.give_up, {"slot": s, "idx": i})
                    else:
                        batch.insert(rng.randrange(len(batch) + 1), (s, i, False, vseq))
            # wait for this round's groups to be published
            while len(self.published) < (round_ + 1) * SLOTS:
                await ctx.tick()

    async def open(self, ctx, payload):
        """Open a group; some start with ``no_page`` set (a doomed transaction's commit)."""
        no_page = int(self.note_rng.random() < 0.15)
        await self.send(ctx, self.dut.open, payload | {"no_page": no_page})
        self.notes[payload["slot"]] = [0, no_page]
        self.noted["open_no_page"] += no_page
        self.check_notes(ctx)

    def check_notes(self, ctx):
        for k, port in enumerate((self.dut.transfer_error, self.dut.no_page)):
            want = sum(n[k] << s for s, n in enumerate(self.notes))
            if ctx.get(port) != want:
                self.violations.append(("per-slot notes", port.name, ctx.get(port), want))

    async def retried(self, ctx, member):
        """Send a failing member with ``retry.ready`` up; the retry it causes."""
        d, r = self.dut, self.dut.retry
        ctx.set(d.member.payload, member)
        ctx.set(d.member.valid, 1)
        ctx.set(r.ready, 1)
        valid, payload = await ctx.tick().sample(r.valid, r.payload).until(d.member.ready)
        ctx.set(d.member.valid, 0)
        ctx.set(r.ready, 0)
        assert valid
        return payload

    async def mapcache(self, ctx):
        req, resp = self.dut.map_req, self.dut.map_resp
        while True:
            # the map port is granted one cycle (or more) after it is asked for
            _, _, lock, grant, valid, p = await ctx.tick().sample(self.dut.map_lock, self.dut.map_grant,
                                                                  req.valid, req.payload)
            ctx.set(self.dut.map_grant, lock and (grant or self.rng.random() < 0.7))
            if not valid:
                continue
            if not grant:
                self.violations.append(("map request without the map port", p.lba))
            ctx.set(req.ready, 1)
            await ctx.tick()
            ctx.set(req.ready, 0)
            assert p.op == MapOp.WRITE
            # the oldest unpublished group holds this member and is programmed completely
            s, lbas, give_up, trim = self.groups[len(self.published)]
            if give_up or p.lba not in lbas:
                self.violations.append(("map write out of open order", p.lba))
            if not all((s, i) in self.programmed for i in range(1 if trim else len(lbas))):
                self.violations.append(("map write before the group was programmed", p.lba))
            if trim and p.value != UNMAPPED:
                self.violations.append(("a trim bound something", p.lba))
            old = self.map.get(p.lba, UNMAPPED)
            self.map[p.lba] = p.value
            self.map_log.append((p.lba, p.value))
            ctx.set(resp.payload, {"old": old, "updated": 1, "hit": 1, "error": 0})
            ctx.set(resp.valid, 1)
            await ctx.tick().until(resp.ready)
            ctx.set(resp.valid, 0)

    async def sinks(self, ctx):
        d = self.dut
        for port in (d.rebind, d.published):
            ctx.set(port.ready, 1)
        while True:
            _, _, rv, rp, pv, pp = await ctx.tick().sample(d.rebind.valid, d.rebind.payload,
                                                          d.published.valid, d.published.payload)
            if rv:
                self.rebinds.append((rp.old.as_bits(), rp.new.as_bits()))
            if pv:
                self.published.append((pp.slot, pp.bus_error, pp.dropped))
                s, lbas, give_up, trim = self.groups[len(self.published) - 1]
                if (pp.slot, pp.dropped) != (s, give_up):
                    self.violations.append(("published out of order or with the wrong outcome", pp.slot))
                if not give_up:
                    for i in range(1 if trim else len(lbas)):
                        self.programmed.pop((s, i), None)


def test_groups_bind_only_when_complete():
    noted = {}
    for seed in range(3):
        tb = PublisherTB(seed)
        tb.sim.run()
        assert tb.violations == []
        assert len(tb.published) == 6 * SLOTS and all(e == 0 for _, e, _ in tb.published)
        assert tb.retries > 0 and any(g for _, _, g, _ in tb.groups) and any(not l for _, l, _, _ in tb.groups)
        assert any(t and not g for _, _, g, t in tb.groups)
        noted = {k: noted.get(k, 0) + v for k, v in tb.noted.items()}
        # the map holds, per LBA, the member written last; every rebind's old is what the map held
        want, held = {}, {}
        for lba, ppa in tb.map_log:
            want[lba] = ppa
        assert tb.map == want
        bound = [lba for _, lbas, give_up, _ in tb.groups if not give_up for lba in lbas]
        assert [lba for lba, _ in tb.map_log] == bound
        for (lba, ppa), (old, new) in zip(tb.map_log, tb.rebinds):
            assert new == ppa and old == held.get(lba, UNMAPPED)
            held[lba] = ppa
        assert len(tb.rebinds) == len(tb.map_log) == len(bound)
    assert all(noted.values()), noted     # bus errors and missing pages noted, and opens with no_page
