"""rtl/ftl/pending.py in amaranth.sim against a Python dict: random RESERVE /
STAGE / SCAN / WALK / CAS requests from three users at once (lowest user
first), answers checked one by one against the order the table took them;
the free count follows; a full table answers RESERVE with no hit; the room
left for staging follows the firmware's budget."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.ftl.pending import PendingOp, PendingTable

ENTRIES, OWNERS = 16, 4
UNMAPPED = 0xFFFF_FFFF


class Reference:
    def __init__(self):
        self.entries = {}            # index -> [owner, lba, ppa]

    def reserve(self, owner, lba, index):
        assert index not in self.entries, f"entry {index} handed out twice"
        self.entries[index] = [owner, lba, UNMAPPED]


async def request(ctx, port, accepted=None, **fields):
    """Send one request; ``accepted()`` runs when the table takes it (requests are served one at a time, in the
    order taken, so that is when its expectation is fixed); returns (expectation, answers up to the last)."""
    ctx.set(port.req.payload, {"op": 0, "owner": 0, "entry": 0, "lba": 0, "nlb": 0, "ppa": 0, "new": 0} | fields)
    ctx.set(port.req.valid, 1)
    await ctx.tick().until(port.req.ready)
    ctx.set(port.req.valid, 0)
    expectation = accepted() if accepted else None
    answers = []
    ctx.set(port.resp.ready, 1)
    while True:
        _, a = await ctx.tick().sample(port.resp.valid, port.resp.payload).until(port.resp.valid)
        answers.append(dict(last=a.last, hit=a.hit, entry=a.entry, idx=a.idx, lba=a.lba, ppa=a.ppa))
        if a.last:
            break
    ctx.set(port.resp.ready, 0)
    return expectation, answers


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pending_table(seed):
    dut = PendingTable(entries=ENTRIES, owners=OWNERS, users=3)
    ref = Reference()
    rng = random.Random(seed)
    checked = {"ops": 0, "full": 0, "walked": 0, "cas_hit": 0, "scan_hits": 0}
    done = []

    async def user(ctx, u):
        port = dut.users[u]
        await ctx.tick().until(dut.ready)
        for _ in range(150):
            await ctx.tick().repeat(1 + rng.randrange(3))
            op = rng.choice([PendingOp.RESERVE] * 3 + [PendingOp.STAGE] * 2 + [PendingOp.SCAN, PendingOp.WALK,
                                                                                 PendingOp.CAS])
            owner = rng.randrange(OWNERS)
            if op == PendingOp.RESERVE:
                lba = rng.randrange(8)
                full, ans = await request(ctx, port, lambda: len(ref.entries) == ENTRIES, op=op, owner=owner,
                                          lba=lba)
                if ans[0]["hit"]:
                    ref.reserve(owner, lba, ans[0]["entry"])
                else:
                    assert full, "RESERVE refused with free entries"
                    checked["full"] += 1
            elif op == PendingOp.STAGE:
                if not ref.entries:
                    continue
                index = rng.choice(sorted(ref.entries))
                ppa = rng.randrange(1 << 20)

                def stage():
                    if index not in ref.entries:      # walked meanwhile: the table still answers its old ppa
                        return None
                    old, ref.entries[index][2] = ref.entries[index][2], ppa
                    return old
                old, ans = await request(ctx, port, stage, op=op, entry=index, ppa=ppa)
                assert len(ans) == 1 and ans[0]["last"]
                if old is not None:
                    assert ans[0]["ppa"] == old, (ans, old)
                else:      # staging a freed entry is a caller's bug; keep the reference in step
                    continue
            elif op == PendingOp.SCAN:
                lba, nlb = rng.randrange(8), rng.randrange(1, 5)
                expected, ans = await request(
                    ctx, port, lambda: sorted((i, e[1] - lba, e[2]) for i, e in ref.entries.items()
                                              if e[0] == owner and lba <= e[1] < lba + nlb),
                    op=op, owner=owner, lba=lba, nlb=nlb)
                assert ans[-1]["last"] and not ans[-1]["hit"]
                got = [(a["entry"], a["idx"], a["ppa"]) for a in ans[:-1]]
                assert got == expected, (got, expected)
                checked["scan_hits"] += len(got)
            elif op == PendingOp.WALK:
                def walk():
                    out = sorted((i, e[1], e[2]) for i, e in ref.entries.items() if e[0] == owner)
                    for i, _, _ in out:
                        del ref.entries[i]
                    return out
                expected, ans = await request(ctx, port, walk, op=op, owner=owner)
                got = [(a["entry"], a["lba"], a["ppa"]) for a in ans[:-1]]
                assert got == expected, (got, expected)
                checked["walked"] += len(got)
            else:
                staged = [i for i, e in ref.entries.items() if e[2] != UNMAPPED]
                ppa = ref.entries[rng.choice(staged)][2] if staged and rng.random() < 0.7 else \
                    (1 << 21) + rng.randrange(100)                        # no entry holds it
                new = (1 << 22) + rng.randrange(1 << 20)

                def cas():
                    holders = sorted(i for i, e in ref.entries.items() if e[2] == ppa)
                    if holders:
                        ref.entries[holders[0]][2] = new
                    return holders
                holders, ans = await request(ctx, port, cas, op=op, ppa=ppa, new=new)
                assert len(ans) == 1 and ans[0]["last"]
                assert ans[0]["hit"] == bool(holders)
                if holders:
                    assert ans[0]["entry"] == holders[0]
                    checked["cas_hit"] += 1
            checked["ops"] += 1
        done.append(u)

    async def quiet(ctx):
        while len(done) < 3:
            await ctx.tick()
        await ctx.tick().repeat(3)
        assert ctx.get(dut.free) == ENTRIES - len(ref.entries)
        # the room a new TX_WRITE or APPEND has: the free entries, no more than the budget leaves
        free, used = ENTRIES - len(ref.entries), len(ref.entries)
        assert used > 1, "the run should leave entries in use"
        for budget, room in ((0, free), (used, 0), (used - 1, 0), (used + 2, min(2, free)), (ENTRIES, free)):
            ctx.set(dut.budget, budget)
            assert ctx.get(dut.room) == room, (budget, used)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for u in range(3):
        async def run(ctx, u=u):
            await user(ctx, u)
        sim.add_testbench(run)
    sim.add_testbench(quiet)
    sim.run()
    assert checked["ops"] > 300 and checked["walked"] and checked["cas_hit"] and checked["scan_hits"], checked
