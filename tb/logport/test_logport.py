"""rtl/ftl/logport.py in amaranth.sim: the executor (groups under its lock), the relocator and PAD
requests share one log writer that takes requests and finds pages at random, and whose completions
come back in random order.  Every page reaches the writer once, as its requester sent it (the
relocator's tagged as such, PAD pages stamped), through the one request register (a page is taken
only while it is empty), no other page comes between a locked group's pages, PAD pages only when
the others were idle as the port chose (a cycle ahead), the executor and the relocator take turns, every completion reaches its own requester,
failed programs reach the firmware's stream in order, and the counters count what got a page."""

import random

import pytest
from amaranth.sim import Simulator

from atomflash import spec
from atomflash.spec import NandResult
from rtl.ftl.logport import HOST_TAG_BITS, PAD_TAG, RELOC_TAG, LogPortArbiter

DIE_BITS = 2


class Source:
    """A stream source that holds its payload until taken, idle a share of the cycles."""

    def __init__(self, rng, items, idle):
        self.rng, self.items, self.idle = rng, list(items), idle
        self.offer = None

    def drive(self, ctx, port, fields):
        if self.offer is None and self.items and self.rng.random() >= self.idle:
            self.offer = self.items.pop(0)
        ctx.set(port.valid, self.offer is not None)
        if self.offer is not None:
            ctx.set(port.payload, fields(self.offer))


class LogPortTB:
    """One testbench process: each cycle it drives every input, then books the handshakes it sampled."""

    def __init__(self, seed: int, *, groups=60, copies=80, pads=40, busy=0.3, idle=0.3, backpressure=0.3):
        self.dut = LogPortArbiter(die_bits=DIE_BITS)
        self.rng = rng = random.Random(seed)
        self.backpressure = backpressure
        serial = iter(range(1, 1 << HOST_TAG_BITS))
        # the executor's groups: (tag, record) pages issued back to back under its lock; and single pages
        # without it, as its retries of failed programs come
        self.groups = [[(next(serial), rng.random() < 0.2) for _ in range(rng.randint(1, 4))] for _ in range(groups)]
        self.unlocked = {g[0] for g in self.groups if len(g) == 1 and rng.random() < 0.7}
        self.copies = [(next(serial), rng.randrange(1 << 30) * 4) for _ in range(copies)]      # (tag, mem_addr)
        self.pads = [rng.randrange(1 << DIE_BITS) for _ in range(pads)]
        self.host = Source(rng, [p for g in self.groups for p in g], busy)
        self.reloc = Source(rng, self.copies, idle)
        self.pad = Source(rng, self.pads, idle)
        self.in_port = []          # (who, item) taken by the port, not yet by the writer
        self.taken = []            # (who, item, allocated) in the writer's order
        self.outstanding = []      # completions the writer owes: tags
        self.done_offer = None
        self.host_done, self.reloc_done = [], []
        self.failed_sent, self.failed_got = [], []    # PPAs of failed programs (not bus errors, not no-page)
        self.turns = []            # (winner, last winner) whenever the executor and the relocator both wanted it
        self.pad_while_busy = 0
        self.in_group = []         # pages of the group being issued
        self.lock = False
        self.intruders = 0
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.run)

    def host_fields(self, item):
        tag, record = item
        return {"tag": tag, "record": record, "mem_addr": tag * 4}

    async def run(self, ctx):
        d, rng = self.dut, self.rng
        last = None
        before = (False, False, False)      # (host valid, reloc valid, lock) in the cycle the port chose in
        taken_of_group = 0                  # pages of the group being issued the port has taken
        total = sum(len(g) for g in self.groups) + len(self.copies) + len(self.pads)
        group_left = 0
        for self.cycles in range(5_000):
            # the executor raises its lock with a group's first page and drops it after the last
            if not self.lock and self.host.offer is None and self.host.items:
                group_left = len(next(g for g in self.groups if g[0] == self.host.items[0]))
                taken_of_group = 0
            self.host.drive(ctx, d.host, self.host_fields)
            self.lock = self.lock or (self.host.offer is not None and self.host.offer not in self.unlocked)
            ctx.set(d.host_lock, self.lock)
            self.reloc.drive(ctx, d.reloc, lambda c: {"tag": c[0], "mem_addr": c[1], "keep_vseq": 1})
            self.pad.drive(ctx, d.pad, lambda die: {"die": die})
            ctx.set(d.req.ready, rng.random() >= self.backpressure)
            ctx.set(d.allocated, rng.random() < 0.9)
            if self.done_offer is None and self.outstanding and rng.random() < 0.5:
                tag = self.outstanding.pop(rng.randrange(len(self.outstanding)))
                fail = rng.random() < 0.15
                how = rng.choice(("program", "dma_error", "no_page")) if fail else "ok"
                self.done_offer = {"tag": tag, "vseq": tag,
                                   "result": NandResult.OK if not fail else NandResult.FAIL,
                                   "dma_error": how == "dma_error", "no_page": how == "no_page"}
            ctx.set(d.done.valid, self.done_offer is not None)
            if self.done_offer is not None:
                ctx.set(d.done.payload, self.done_offer)
                ctx.set(d.done.payload.ppa.as_value(), self.done_offer["tag"])     # a PPA to tell failures apart
            ctx.set(d.failed.ready, rng.random() >= self.backpressure)
            ctx.set(d.host_done.ready, rng.random() >= self.backpressure)
            ctx.set(d.reloc_done.ready, rng.random() >= self.backpressure)
            (_, _, hv, hr, rv, rr, pv, pr, lock, idle, qv, qr, q, alloc, force, die, pad_now,
             dv, dr, hdv, hdr, hd, rdv, rdr, rd, fv, fr, f) = await ctx.tick().sample(
                d.host.valid, d.host.ready, d.reloc.valid, d.reloc.ready, d.pad.valid, d.pad.ready, d.host_lock,
                d.idle, d.req.valid, d.req.ready, d.req.payload, d.allocated, d.force, d.force_die, d.pad_now,
                d.done.valid, d.done.ready,
                d.host_done.valid, d.host_done.ready, d.host_done.payload,
                d.reloc_done.valid, d.reloc_done.ready, d.reloc_done.payload,
                d.failed.valid, d.failed.ready, d.failed.payload)
            assert idle == (not hv and not rv and not (qv and not pad_now))
            assert len(self.in_port) == qv         # what the port took is on its output, the next cycle
            # the port takes a page from its requester (only while its request register is empty)
            accepted = [who for who, v, r in (("host", hv, hr), ("reloc", rv, rr), ("pad", pv, pr)) if v and r]
            assert len(accepted) <= 1 and not (accepted and qv), (accepted, qv)
            if accepted:
                who = accepted[0]
                source = {"host": self.host, "reloc": self.reloc, "pad": self.pad}[who]
                self.in_port.append((who, source.offer))
                source.offer = None
                if who == "pad" and any(before):
                    self.pad_while_busy += 1
                if lock and taken_of_group and who != "host":
                    self.intruders += 1
                if who == "host":
                    group_left -= 1
                    taken_of_group += 1
                if before[0] and before[1] and not before[2] and who != "pad":
                    self.turns.append((who, last))
                last = who
            before = (bool(hv), bool(rv), bool(lock))
            # the writer takes it from the register
            if qv and qr:
                who, item = self.in_port.pop(0)
                if who == "pad":
                    assert q.tag & PAD_TAG and force and die == item and pad_now and q.no_data
                    assert q.oob.kind == spec.Kind.PAD
                elif who == "reloc":
                    assert q.tag & RELOC_TAG and not force and not pad_now
                    assert (q.tag & ~RELOC_TAG, q.mem_addr, q.keep_vseq) == (item[0], item[1], 1)
                else:
                    assert (q.tag, q.record) == item and not force and not pad_now
                self.taken.append((who, item, alloc))
                self.outstanding.append(q.tag)
            if self.lock and group_left == 0:
                self.lock = False
            if dv and dr:
                o = self.done_offer
                if o["result"] != NandResult.OK and not o["dma_error"] and not o["no_page"]:
                    self.failed_sent.append(o["tag"])
                self.done_offer = None
            if fv and fr:
                self.failed_got.append(f)
            if hdv and hdr:
                self.host_done.append(hd.tag)
            if rdv and rdr:
                self.reloc_done.append(rd.tag)
            if (len(self.taken) == total and not self.outstanding and self.done_offer is None
                    and len(self.failed_got) == len(self.failed_sent)):
                break
        self.counters = {name: ctx.get(getattr(d, name)) for name in ("host_write_pages", "record_pages", "pad_pages")}
        self.failed_lost = ctx.get(d.failed_lost)
        assert self.cycles < 4_999, "the run did not finish"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_page_once_groups_whole_turns_and_completions_home(seed):
    tb = LogPortTB(seed)
    tb.sim.run()
    host = [item for who, item, _ in tb.taken if who == "host"]
    assert host == [p for g in tb.groups for p in g]                      # in order, each once
    assert sorted(item for who, item, _ in tb.taken if who == "reloc") == sorted(tb.copies)
    assert sorted(item for who, item, _ in tb.taken if who == "pad") == sorted(tb.pads)
    assert tb.intruders == 0 and tb.pad_while_busy == 0
    assert len(tb.turns) >= 10, tb.turns                                   # the contended case was tried
    assert all((who == "reloc") == (prev != "reloc") for who, prev in tb.turns), tb.turns
    assert sorted(tb.host_done) == sorted(t for t, _ in host)
    assert sorted(tb.reloc_done) == sorted(t | RELOC_TAG for t, _ in tb.copies)
    counts = {name: 0 for name in tb.counters}
    for who, item, alloc in tb.taken:
        if alloc and who == "pad":
            counts["pad_pages"] += 1
        elif alloc and who == "host":
            counts["record_pages" if item[1] else "host_write_pages"] += 1
    assert tb.counters == counts
    assert tb.failed_got == tb.failed_sent and len(tb.failed_sent) >= 5 and not tb.failed_lost
