"""cocotb side of ``make bench-nvme``: the whole NVMe drive (``sim/nvme``) under cocotbext-pcie's
root complex, the host driver ``atomflash.nvme.NvmeHost`` in a worker thread keeping QD commands in
flight over 1 or 4 I/O queues, measured in simulated time.  Writes its figures as JSON to
``$NVME_BENCH_OUT``; ``sim/bench_nvme.py`` turns them into docs.

Times are taken where the host sees them, not where it happens to poll: a command's doorbell is the
simulated time its SQ tail write leaves the root complex, its completion the time its CQE lands in
host memory (the root complex's memory region notes every write the device makes into a CQ), so
neither depends on how often the host looks.  Between looks the host sleeps until an MSI-X message
or ``POLL_NS``, as an interrupt-driven driver does.
"""

import json
import os
import random
import statistics

import cocotb
from cocotb.triggers import First, Timer
from cocotb.utils import get_sim_time

from atomflash.nvme import NvmeHost
from atomflash.spec import NvmeIoOpcode as Io, Opcode, Status
from sim.harness.ftl_tb import QUEUE_SIZE
from sim.nvme.drive_tb import start_drive
from sim.pcie.nvme_host_bridge import PcieNvmeLink, RootComplexMemory, in_thread

CFG = json.loads(os.environ["NVME_BENCH"])
POLL_NS = 1000                  # the host's longest sleep between looks at its CQs
QUEUE_ENTRIES = CFG["queue_entries"]
CORE_SAMPLES = CFG["core_samples"]      # QD 1 commands timed on the core's own queue


class TimedLink(PcieNvmeLink):
    """PcieNvmeLink noting when its last BAR write left the root complex, sleeping until an MSI-X
    message (or ``poll_ns``) when the driver waits."""

    last_write_ns = 0.0

    def mmio_write(self, offset: int, value: int) -> None:
        async def write():
            self.last_write_ns = get_sim_time("ns")
            await self.window.write_dword(offset, value)
        cocotb.function(write)()

    def advance(self) -> None:
        async def sleep():
            events = [v.event for v in self.pdev.msi_vectors]
            for e in events:
                e.clear()
            await First(Timer(self.poll_ns, "ns"), *(e.wait() for e in events))
        self.advances += 1
        cocotb.function(sleep)()


class CqArrivals:
    """The simulated time each CQ slot last received a write from the device."""

    def __init__(self, memory: RootComplexMemory):
        self.memory, self.queues, self.times = memory, {}, {}
        region = memory.region
        serve = region._write

        async def write(address, data, **kwargs):
            now = get_sim_time("ns")
            for qid, (start, entries) in self.queues.items():
                if start <= address < start + 16 * entries:
                    for slot in range((address - start) // 16, min(entries, (address - start + len(data) + 15) // 16)):
                        self.times[qid][slot] = now
            await serve(address, data, **kwargs)
        region._write = write

    def watch(self, host: NvmeHost):
        for qid in host.io_queues:
            q = host.queues[qid]
            self.queues[qid] = (q.cq - self.memory.base, q.entries)
            self.times[qid] = [0.0] * q.entries


def block(lba: int, version: int) -> bytes:
    """The 4 KiB an LBA holds after its ``version``-th write: a reader can tell which write it got."""
    return (lba.to_bytes(4, "little") + version.to_bytes(4, "little")) * 512


def run_case(host, link, arrivals, opcode, lbas, qd, queues, contents) -> dict:
    """``lbas`` as single-block commands, ``qd`` in flight spread round robin over the first
    ``queues`` I/O queues; each completion checked (a read's data against ``contents``).  Returns
    the first doorbell, the last CQE's arrival, every command's doorbell-to-CQE latency and every CQE's
    arrival, in the order the host took them (ns)."""
    qids = host.io_queues[:queues]
    inflight, latencies, arrived = {}, [], []
    first, last, sent = None, 0.0, 0
    while sent < len(lbas) or inflight:
        progressed = False
        for qid in qids:
            q = host.queues[qid]
            head = q.head
            for k, (c, data) in enumerate(host.collect(qid)):
                assert c.ok, f"{opcode.name} failed: {c}"
                lba, doorbell = inflight.pop((qid, c.cid))
                if opcode == Io.READ:
                    assert data == contents[lba], f"LBA {lba} read back wrong"
                t = arrivals.times[qid][(head + k) % q.entries]
                latencies.append(t - doorbell)
                arrived.append(t)
                last = max(last, t)
                progressed = True
        while sent < len(lbas) and len(inflight) < qd:
            qid, lba = qids[sent % len(qids)], lbas[sent]
            if opcode == Io.WRITE:
                contents[lba] = block(lba, sent)
                cid = host.submit(qid, Io.WRITE, slba=lba, cdw12=0, data_out=contents[lba])
            else:
                cid = host.submit(qid, Io.READ, slba=lba, cdw12=0, data_in=host.block)
            inflight[(qid, cid)] = (lba, link.last_write_ns)
            first = link.last_write_ns if first is None else first
            sent += 1
            progressed = True
        if not progressed:
            link.advance()
    return dict(first_ns=first, last_ns=last, commands=len(lbas), latencies_ns=latencies, cqe_ns=arrived)


async def core_qd1(tb, lbas) -> dict:
    """QD 1 writes and reads of single pages on the core's own queue (the firmware's pair, which
    FtlCoreTB drives), submission to completion in cycles: the core's path without NVMe."""
    ftl = tb.ftl
    saved, ftl.poll_cycles = ftl.poll_cycles, 4          # to within 4 cycles
    buf = ftl.data                                      # the firmware model's scratch is at +0x8000
    ftl.write_bytes(buf, block(0, 0))
    out = {"write": [], "read": []}
    for lba in lbas:
        for kind, opcode in (("write", Opcode.WRITE), ("read", Opcode.READ)):
            start = int(tb.dut.cycle.value)
            r = await ftl.do(opcode=opcode, lba=lba, nlb=1, buf=buf)
            assert r["status"] == Status.SUCCESS
            out[kind].append(r["cycle"] - start)
    ftl.poll_cycles = saved
    return out


CORE_RING_QD = QUEUE_SIZE - 1       # the core's own queue: its ring holds one entry less than its size


async def core_at_depth(tb, op, lbas, qd) -> dict:
    """``lbas`` as single-page commands on the core's own queue (FtlCoreTB, the firmware's pair), ``qd``
    in flight: the same run as an NVMe case without the NVMe path.  Cycles from the first submission,
    as the NVMe cases' ns are from the first doorbell."""
    ftl = tb.ftl
    saved, ftl.poll_cycles = ftl.poll_cycles, 64
    buf = ftl.data
    opcode = Opcode.WRITE if op == "write" else Opcode.READ
    cycles, statuses, done = await ftl.run_queue([dict(opcode=opcode, lba=lba, nlb=1, buf=buf) for lba in lbas],
                                                 min(qd, CORE_RING_QD))
    ftl.poll_cycles = saved
    assert set(statuses) == {Status.SUCCESS}, statuses
    return dict(op=op, qd=qd, ring_qd=min(qd, CORE_RING_QD), commands=len(lbas), cycles=cycles, done_cycles=done)


@cocotb.test()
async def bench(dut):
    tb, firmware, limits = await start_drive(dut, capacity=CFG["capacity"], blocks_per_die=CFG["blocks_per_die"],
                                             idle_ns=2000)
    tb.ftl.poll_cycles = 1024                          # the core's own queue stays idle here
    link = TimedLink(tb.pdev, poll_ns=POLL_NS)
    memory = RootComplexMemory(tb.rc)
    arrivals = CqArrivals(memory)
    rng = random.Random(5)
    capacity = limits.capacity
    clk_hz = tb.config.user_clk_hz
    host = None
    contents: dict[int, bytes] = {}
    cases = []
    warm = rng.sample(range(capacity), CFG["warm"])    # written first: the reads' LBAs

    def dump(figures):
        """What the run has so far, so a run cut short still leaves its cases."""
        with open(os.environ["NVME_BENCH_OUT"], "w") as f:
            json.dump(figures, f, indent=1)

    def bring_up():
        nonlocal host
        host = NvmeHost(link, memory, io_queues=CFG["queues"], queue_entries=QUEUE_ENTRIES).initialize()
        arrivals.watch(host)
        assert len(host.io_queues) == CFG["queues"]

    def measure(op):
        if op == "warm":
            r = run_case(host, link, arrivals, Io.WRITE, warm, 32, CFG["queues"], contents)
            cases.append(dict(op="warm-up writes", qd=32, queues=CFG["queues"], **r))
            return
        for queues in (1, CFG["queues"]):
            for qd in (1, 8, 32):
                n = CFG["qd1_commands"] if qd == 1 else CFG[f"{op}_commands"]
                if op == "write":
                    lbas = [rng.randrange(capacity) for _ in range(n)]
                else:
                    lbas = [rng.choice(warm) for _ in range(n)]
                r = run_case(host, link, arrivals, Io.WRITE if op == "write" else Io.READ, lbas, qd, queues,
                             contents)
                cases.append(dict(op=op, qd=qd, queues=queues, **r))
                dump(dict(CFG, partial=True, cases=cases))
                cocotb.log.info(f"{op} QD {qd} x {queues} queues: {n} commands in "
                                f"{(r['last_ns'] - r['first_ns']) / 1e3:,.0f} us")

    start_ns = get_sim_time("ns")
    await in_thread(bring_up)
    for op in CFG["ops"]:
        await in_thread(measure, op)
    # the core's own QD 1 latency, on LBAs the warm-up wrote (the drive's queues idle meanwhile)
    core = await core_qd1(tb, warm[:CORE_SAMPLES])
    # the core alone at the NVMe cases' depths and command counts: what the host interface is held to
    core_cases = []
    for op in (o for o in CFG["ops"] if o in ("write", "read")):
        for qd in (8, 32):
            n = CFG[f"{op}_commands"]
            lbas = [rng.randrange(capacity) for _ in range(n)] if op == "write" else [rng.choice(warm) for _ in range(n)]
            core_cases.append(await core_at_depth(tb, op, lbas, qd))
            cocotb.log.info(f"core alone, {op} QD {qd}: {n} commands in {core_cases[-1]['cycles']:,} cycles")
    out = dict(CFG, clk_hz=clk_hz, poll_ns=POLL_NS, cases=cases, core_qd1=core, core_cases=core_cases,
               core_qd1_median={k: statistics.median(v) for k, v in core.items()},
               sim_ns=get_sim_time("ns") - start_ns, pcie=dict(
                   speed=tb.config.speed, lanes=tb.config.nlanes, data_width=tb.config.data_width,
                   user_clk_hz=clk_hz, max_payload_supported=tb.config.max_payload_supported,
                   max_payload_size=128 << int(dut.cfg_max_payload.value),
                   max_read_request_size=128 << int(dut.cfg_max_read_req.value)),
               interrupts=dict(link.interrupts), advances=link.advances)
    dump(out)
