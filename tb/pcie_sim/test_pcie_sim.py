"""The host library as the root complex of the full simulated SoC's PCIe link.

One build (``soc/sim.py --build-only --no-nand --pcie exerciser``: the SoC with the identify
placeholder and a PCIe function whose BAR0 user block is ``PcieExerciser``, cached in its own
build directory) and one simulator for the module, its link (``pcie2tcp``, gen2 x1, 250 ns a
direction) on a free port; ``SimPcieLink`` connects with ``HostMemory`` behind it.  The tests run in
order on that simulator: BAR0, DMA both ways (contents, TLPs, socket messages), the link's
simulated cost, MSI-X, refused pages, configuration.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atomflash.hostmem import HostMemory
from atomflash.pcie_link import MSIX_WINDOW, SimPcieLink, add_sim_module
from atomflash.simctl import prepare_run_dir, vsim_command

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("pcie_sim")]

ROOT = Path(__file__).resolve().parents[2]

# soc.pcie.EXERCISER_REGS (tests read the gateware's numbers from the source of truth below)
sys.path.insert(0, str(ROOT))
from soc.pcie import EXERCISER_BUFFER_OFFSET, EXERCISER_ID, EXERCISER_REGS as R  # noqa: E402

GEN, LANES, LATENCY_NS = 2, 1, 250


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gateware() -> Path:
    r = subprocess.run(["nice", sys.executable, str(ROOT / "soc" / "sim.py"), "--build-only", "--no-nand",
                        "--pcie", "exerciser", "-q"], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout[-3000:]
    return Path(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sim(gateware, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("pcie_sim")
    prepare_run_dir(gateware, run_dir)
    port = _free_port()
    add_sim_module(run_dir / "sim_config.js", port, gen=GEN, lanes=LANES, latency_ns=LATENCY_NS)
    with open(run_dir / "vsim.log", "wb") as log:
        proc = subprocess.Popen(["nice", *vsim_command(gateware)], cwd=run_dir, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield port, run_dir
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def memory():
    return HostMemory(base=0x1_0000_0000)


@pytest.fixture(scope="module")
def link(sim, memory):
    port, _ = sim
    with SimPcieLink(port, memory, max_payload=256, max_read_request=512, timeout=60) as link:
        yield link


def dma(link, addr: int, nbytes: int, to_host: bool, quiet: float = 0.0) -> int:
    """One exerciser transfer, waited for by polling DMA_STATUS; the final status.  ``quiet``:
    wall-clock seconds to leave the link to the transfer before polling (a poll's completion would
    share the wire with it)."""
    link.mmio_write(R["DMA_ADDR_LO"], addr & 0xFFFF_FFFF)
    link.mmio_write(R["DMA_ADDR_HI"], addr >> 32)
    link.mmio_write(R["DMA_LEN"], nbytes)
    done = link.mmio_read(R["DMA_STATUS"]) >> 16
    link.mmio_write(R["DMA_CTRL"], 1 if to_host else 2)
    time.sleep(quiet)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = link.mmio_read(R["DMA_STATUS"])
        if not status & 1 and status >> 16 == (done + 1) & 0xFFFF:
            return status
    raise AssertionError("the exerciser's DMA did not finish")


def new_tlps(link, since: int, kind: str):
    link.status()                       # a barrier: every TLP sent before it has been taken
    return [t for t in link.device_tlps[since:] if t.kind == kind]


def wire_cycles(st: dict, payload: int, header: int = 12) -> float:
    """Cycles a TLP of ``payload`` bytes occupies the modelled link (the module's status)."""
    return (payload + header + st["framing_bytes"]) * st["ps_per_byte"] / st["clk_period_ps"]


def test_bar0_registers(link):
    assert link.mmio_read(R["ID"]) == EXERCISER_ID
    assert link.mmio_read(R["VERSION"]) == 1
    for pattern in (0xDEADBEEF, 0x0, 0xFFFF_FFFF, 0x1234_5678):
        link.mmio_write(R["SCRATCH"], pattern)
        assert link.mmio_read(R["SCRATCH"]) == pattern
    link.mmio_write(R["ID"], 0)                                   # read-only
    assert link.mmio_read(R["ID"]) == EXERCISER_ID
    assert link.mmio_read(R["LINK"]) & 0b11 == 0b11               # link up, bus master (as configured)
    assert (link.mmio_read(R["MPS"]), link.mmio_read(R["MRRS"])) == (256, 512)
    assert link.mmio_read(0x3800) == 0                            # unmapped: reads zero
    link.mmio_write(EXERCISER_BUFFER_OFFSET + 4 * 7, 0xA5A5_0007)
    assert link.mmio_read(EXERCISER_BUFFER_OFFSET + 4 * 7) == 0xA5A5_0007


def test_dma_from_host(link, memory):
    src = memory.alloc(2 * 4096)
    data = os.urandom(4096)
    memory.write(src, data)
    n0 = len(link.device_tlps)
    status = dma(link, src, 4096, to_host=False)
    assert not status & 2
    reads = new_tlps(link, n0, "MRd")
    assert [(t.address, 4 * t.length) for t in reads] == [(src + 512 * i, 512) for i in range(8)]
    assert reads[0].address >= 1 << 32                            # 4-dword headers
    # the eight requests reached the host in at most two messages, each answered by one
    assert len({t.message for t in reads}) <= 2
    # back to the host elsewhere, across a page boundary below 4 GiB: what arrives is what left
    low = 0x4000_0F00
    memory.write(low - 64, bytes(4096 + 128))
    n0 = len(link.device_tlps)
    assert not dma(link, low, 4096, to_host=True) & 2
    writes = new_tlps(link, n0, "MWr")
    assert memory.read(low, 4096) == data
    assert memory.read(low - 64, 64) == bytes(64) and memory.read(low + 4096, 64) == bytes(64)
    assert all(t.address < 1 << 32 for t in writes)               # 3-dword headers
    assert [t.address for t in writes] == [low + i * 256 for i in range(16)]


def test_dma_to_host(link, memory):
    data = os.urandom(4096)
    for i in range(0, 4096, 256):                                 # the buffer, by BAR0 writes
        for j in range(0, 256, 4):
            link.mmio_write(EXERCISER_BUFFER_OFFSET + i + j, int.from_bytes(data[i + j:i + j + 4], "little"))
    dst = memory.alloc(3 * 4096) + 4096 - 32                      # 32 bytes before a page boundary
    n0 = len(link.device_tlps)
    assert not dma(link, dst, 4096, to_host=True) & 2
    writes = new_tlps(link, n0, "MWr")
    assert memory.read(dst, 4096) == data
    assert memory.read(dst - 32, 32) == bytes(32) and memory.read(dst + 4096, 32) == bytes(32)
    # cut at 256-byte boundaries (max payload), so never across 4 KiB
    assert [(t.address, 4 * t.length) for t in writes] == \
        [(dst, 32)] + [(dst + 32 + 256 * i, 256) for i in range(15)] + [(dst + 32 + 256 * 15, 224)]
    assert len({t.message for t in writes}) <= 2                  # 16 TLPs, one or two socket messages


def test_link_rate(link, memory):
    """The simulated time of a 4 KiB DMA each way is what the modelled link gives, in cycles."""
    st = link.status()
    assert (st["gen"], st["lanes"], st["latency_ps"]) == (GEN, LANES, LATENCY_NS * 1000)
    assert st["ps_per_byte"] == 2000.0                            # gen2 x1: 5 GT/s, 8b/10b: 0.5 B/ns
    latency = st["latency_ps"] / st["clk_period_ps"]

    # device -> host: 16 writes of 256 bytes, back to back on the wire
    dst = memory.alloc(4096)
    n0 = len(link.device_tlps)
    dma(link, dst, 4096, to_host=True, quiet=0.1)
    writes = new_tlps(link, n0, "MWr")
    assert len(writes) == 16
    span = writes[-1].host_cycle - writes[0].sent_cycle
    floor = 16 * wire_cycles(st, 256) + latency                   # 883 + 25 cycles
    print(f"span {span} cycles, floor {floor:.1f}")
    assert floor <= span <= floor + 64, (span, floor)
    # from the third on, each reaches the host one wire time after the one before: the link, not the
    # 64-bit datapath (34 beats a TLP), sets the pace
    gaps = [b.host_cycle - a.host_cycle for a, b in zip(writes[2:], writes[3:])]
    assert all(abs(g - wire_cycles(st, 256)) <= 1 for g in gaps), (gaps, wire_cycles(st, 256))

    # host -> device: 8 reads of 512 bytes, answered by 16 completions of 256
    src = memory.alloc(4096)
    n0 = len(link.device_tlps)
    dma(link, src, 4096, to_host=False, quiet=0.1)
    reads = new_tlps(link, n0, "MRd")
    done = link.status()["last_completion_cycle"]
    span = done - reads[0].sent_cycle
    floor = wire_cycles(st, 0, 16) + 2 * latency + 16 * wire_cycles(st, 256)
    print(f"span {span} cycles, floor {floor:.1f}")
    assert floor <= span <= floor + 64, (span, floor)


def test_msix(link):
    assert link.enable_interrupts(4) == 4
    assert link.mmio_read(0x2000 + 16 * 3) == MSIX_WINDOW[0]       # the table as programmed
    assert link.mmio_read(0x2000 + 16 * 3 + 8) == 3
    assert link.mmio_read(R["LINK"]) & 0b100                      # MSI-X enable reaches the function
    link.mmio_write(R["IRQ"], 0b1010)
    assert link.wait_interrupt(1) and link.wait_interrupt(3)
    link.status()
    assert link.interrupts == {1: 1, 3: 1}
    assert not link.wait_interrupt(0, timeout=0.2)
    msgs = [t for t in link.device_tlps if t.kind == "MWr" and t.address == MSIX_WINDOW[0]]
    assert len(msgs) == 2 and all(t.length == 1 for t in msgs)


def test_refused_pages(link, memory):
    page = memory.alloc(3 * 4096)
    memory.refuse(page + 4096)
    refusals = len(link.refusals)
    status = dma(link, page + 4096 - 256, 512, to_host=False)     # two requests, the second refused
    assert status & 2                                             # the exerciser reports a DMA error
    assert link.refusals[refusals:] == [("read", page + 4096, 256)]
    link.mmio_write(R["DMA_CTRL"], 4)                             # clear the error
    assert not link.mmio_read(R["DMA_STATUS"]) & 2
    status = dma(link, page + 4096, 256, to_host=True)            # a write to it is dropped
    assert not status & 2
    assert link.refusals[refusals + 1:] == [("write", page + 4096, 256)]
    memory.write(page + 2 * 4096, bytes(256))
    data = os.urandom(256)
    for i in range(0, 256, 4):
        link.mmio_write(EXERCISER_BUFFER_OFFSET + i, int.from_bytes(data[i:i + 4], "little"))
    assert not dma(link, page + 2 * 4096, 256, to_host=True) & 2  # the next page works
    assert memory.read(page + 2 * 4096, 256) == data


def test_configuration(link):
    st = link.configure(max_payload=128, max_read_request=256, bus_master=0)
    assert (st["max_payload"], st["max_read_request"], st["bus_master"]) == (128, 256, 0)
    assert (link.mmio_read(R["MPS"]), link.mmio_read(R["MRRS"])) == (128, 256)
    assert not link.mmio_read(R["LINK"]) & 0b10
    link.configure(max_payload=256, max_read_request=512, bus_master=1)
    assert link.mmio_read(R["LINK"]) & 0b10
