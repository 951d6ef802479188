"""``make bench-etherbone``: the Ethernet host link of the simulated SSD
(``atomflash sim start --ethernet``: LiteEth and Etherbone on the PHY model,
``soc/eth2udp.c`` as the LAN) in simulated time, against the wire.

1. **The link alone**: 256 KiB written to and read back from host memory
   through ``atomflash.transport.EtherboneTransport``, with one request in
   flight and with the host's window; the debug port (UARTBone) for
   comparison.  Simulated cycles come from the SoC's uptime counter, read
   over the link under test.
2. **The drive through it**: ``atomflash bench`` (random one-LBA writes and
   reads of written data at QD 8) over Etherbone and over the debug port,
   against the link's own rate and the NAND's.

The wire: LiteEth's PHY model moves a byte per system clock and the gateway
adds preamble, FCS and inter-frame gap (24 byte times) to every frame, so
the simulated link is a gigabit wire clocked at the system clock: 100 MB/s
at 100 MHz against 125 MB/s for 1000BASE-T.  A request frame carries at most
one Etherbone record (1,012 bytes written or 1,020 read), which bounds what
the link can move below the raw byte rate (the *wire limit* below).  The
simulated host is on the same machine: a round trip has no network latency
beyond the gateway's polling, where a real LAN adds tens of microseconds;
the window is what covers that.  Writes docs/results/etherbone_bench.md,
etherbone_bench.json and etherbone_bench.png.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from atomflash import simctl, spec  # noqa: E402
from atomflash.bench import BenchConfig, run_bench  # noqa: E402
from atomflash.device import Device, Layout  # noqa: E402
from atomflash.transport import EtherboneTransport, UartBoneTransport  # noqa: E402

RESULTS = ROOT / "docs" / "results"
DOC = RESULTS / "etherbone_bench.md"
LINK_BYTES = 256 * 1024
WIRE_GAP = 24            # soc/eth2udp.c: preamble + SFD, FCS, inter-frame gap
FRAME_HEADERS = spec.ETHERBONE.frame_header_bytes


def progress(msg: str):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def wire_limits(clk_hz: int) -> dict:
    """Bytes per second a stream of the largest records can move, one byte per clock."""
    write_data = 4 * EtherboneTransport.WRITE_WORDS
    write_frame = FRAME_HEADERS + 4 + write_data + 4 + 4          # base address, words, return address, one read
    read_data = 4 * EtherboneTransport.READ_WORDS
    read_frame = FRAME_HEADERS + 4 + read_data                     # return address, addresses (the answer alike)
    return {"clk_hz": clk_hz, "raw_Bps": clk_hz,
            "write_Bps": clk_hz * write_data / (write_frame + WIRE_GAP),
            "read_Bps": clk_hz * read_data / (read_frame + WIRE_GAP)}


class Uptime:
    """The SoC's cycle counter (LiteX's timer uptime), read over ``transport``."""

    def __init__(self, csr_csv: str, transport):
        regs = {}
        for line in Path(csr_csv).read_text().splitlines():
            f = line.split(",")
            if f[0] == "csr_register":
                regs[f[1]] = int(f[2], 0)
        self.latch, self.cycles = regs["timer0_uptime_latch"], regs["timer0_uptime_cycles"]
        self.t = transport

    def __call__(self) -> int:
        self.t.write(self.latch, [1])
        hi, lo = self.t.read(self.cycles, 2)
        return hi << 32 | lo


def link_case(name: str, transport, csr_csv: str, base: int, clk_hz: int) -> dict:
    uptime = Uptime(csr_csv, transport)
    words = [(i * 2654435761) & 0xFFFF_FFFF for i in range(LINK_BYTES // 4)]
    c0 = uptime()
    transport.write(base, words)
    c1 = uptime()
    back = transport.read(base, len(words))
    c2 = uptime()
    if back != words:
        raise SystemExit(f"{name}: host memory read back differs")
    return {"link": name, "write_Bps": LINK_BYTES * clk_hz / (c1 - c0), "read_Bps": LINK_BYTES * clk_hz / (c2 - c1),
            "write_cycles": c1 - c0, "read_cycles": c2 - c1,
            "resends": getattr(transport, "resends", 0)}


def drive_case(name: str, dev, read_pct: int, ops: int) -> dict:
    res = run_bench(dev, BenchConfig(qd=8, ops=ops, read_pct=read_pct, seed=3))["results"]
    pages = res["read_pages_per_s"] if read_pct else res["write_pages_per_s"]
    return {"link": name, "op": "read" if read_pct else "write", "pages_per_s": pages,
            "Bps": pages * dev.lba_size, "nand_program_limit_pages_per_s": res["nand_program_limit_pages_per_s"],
            "simulated_ms": res["simulated_ms"]}


def measure(args) -> dict:
    clk_hz = int(spec.NAND_CLK_HZ)
    with tempfile.TemporaryDirectory(dir=ROOT / "build") as tmp:
        run = Path(tmp) / "run"
        progress("building (cached) and booting the simulated SSD with its Ethernet port")
        simctl.start(run, simctl.SimConfig(etherbone=True), fresh=True)
        try:
            st = simctl.status(run)
            layout = Layout.from_csr_csv(st["csr_csv"])
            scratch = layout.hostmem_base + layout.hostmem_size - LINK_BYTES   # no queue lives there yet
            links = []
            for window in (1, spec.ETHERBONE.window):
                progress(f"the link alone: Etherbone, window {window}")
                with EtherboneTransport("127.0.0.1", st["etherbone_port"], bind_port=0, window=window,
                                        timeout=5) as t:
                    t.pipeline(layout.hostmem_base, layout.hostmem_size)
                    links.append(link_case(f"Etherbone, window {window}", t, st["csr_csv"], scratch, clk_hz))
            progress("the link alone: the debug port")
            with UartBoneTransport(st["port"]) as t:
                links.append(link_case("debug port (UARTBone)", t, st["csr_csv"], scratch, clk_hz))
            drive = []
            for port, name in (("etherbone", f"Etherbone, window {spec.ETHERBONE.window}"),
                               ("debug", "debug port (UARTBone)")):
                dev = Device.attach_sim(run, port=port)
                try:
                    for read_pct in (0, 100):
                        progress(f"the drive: {name}, {'reads' if read_pct else 'writes'}")
                        drive.append(drive_case(name, dev, read_pct, args.ops))
                finally:
                    dev.close()
            lba = dev.lba_size
        finally:
            simctl.stop(run, power_cut=True)
    return {"wire": wire_limits(clk_hz), "links": links, "drive": drive, "lba_size": lba, "link_bytes": LINK_BYTES,
            "ops": args.ops, "window": spec.ETHERBONE.window}


def mbs(bps: float) -> str:
    return f"{bps / 1e6:.1f}"


def render(data: dict) -> None:
    wire = data["wire"]
    lines = ["# Etherbone host link (simulated)", "",
             "Generated by `make bench-etherbone` (`sim/bench_etherbone.py`).  The simulated SSD with its Ethernet "
             "port (`atomflash sim start --ethernet`): LiteEth's UDP/IP core and Etherbone on the PHY model, as "
             "`soc/etherbone.py` puts them on an Ethernet board, with `soc/eth2udp.c` as the LAN.  Figures in "
             f"simulated time at {wire['clk_hz'] / 1e6:.0f} MHz (the SoC's uptime counter).", "",
             f"The wire moves a byte per clock ({mbs(wire['raw_Bps'])} MB/s) with 24 byte times per frame of preamble, "
             "FCS and gap.  One record per frame bounds what it can carry: "
             f"**{mbs(wire['write_Bps'])} MB/s of writes** ({EtherboneTransport.WRITE_WORDS} words a frame) and "
             f"**{mbs(wire['read_Bps'])} MB/s of reads** ({EtherboneTransport.READ_WORDS} words a frame, "
             "the addresses one way and the words the other), the wire limit below.  1000BASE-T moves 125 MB/s; "
             "the drive's LiteEth core runs a 32-bit datapath on the system clock (`soc/etherbone.py`), 240 MB/s "
             "at a board's 60 MHz, so on a board the wire is the limit.", "",
             f"## The link alone: {data['link_bytes'] // 1024} KiB of host memory written and read back", "",
             "| link | write MB/s | of the wire limit | read MB/s | of the wire limit | resends |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for c in data["links"]:
        lines.append(f"| {c['link']} | {mbs(c['write_Bps'])} | {100 * c['write_Bps'] / wire['write_Bps']:.1f}% | "
                     f"{mbs(c['read_Bps'])} | {100 * c['read_Bps'] / wire['read_Bps']:.1f}% | {c['resends']} |")
    eb = next(c for c in data["links"] if c["link"].endswith(f"window {data['window']}"))
    lines += ["", "## The drive through the link: `atomflash bench`, one LBA "
              f"({data['lba_size']} B) per command, QD 8, {data['ops']} commands", "",
              "| link | op | pages/s | MB/s | of the link alone | NAND program limit, pages/s |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for c in data["drive"]:
        alone = next(x for x in data["links"] if x["link"] == c["link"])
        ref = alone["read_Bps"] if c["op"] == "read" else alone["write_Bps"]
        lines.append(f"| {c['link']} | {c['op']}s | {c['pages_per_s']:,.0f} | {mbs(c['Bps'])} | "
                     f"{100 * c['Bps'] / ref:.1f}% | {c['nand_program_limit_pages_per_s']:,.0f} |")
    lines += ["", "## Reading the figures", "",
              f"* With {data['window']} requests in flight the link moves {mbs(eb['write_Bps'])} MB/s of writes and "
              f"{mbs(eb['read_Bps'])} MB/s of reads, {100 * eb['write_Bps'] / wire['write_Bps']:.0f}% and "
              f"{100 * eb['read_Bps'] / wire['read_Bps']:.0f}% of what the wire can carry in records; one request at "
              "a time leaves the wire idle for every round trip (the gateway's polling, the host's own time, the "
              "drive's bus), and on a LAN each round trip costs tens of microseconds more.",
              "* Through the drive, every command adds small requests to its data's records (the submission "
              "entry; the doorbell, which waits until the command's data is answered so that a lost record can "
              "never let the drive run on stale data; the completion poll and its doorbell), each a round trip, "
              "so a one-LBA command moves less than the link alone.",
              *_read_bound(data),
              "* The debug port in simulation is a byte stream with no baud rate (LiteX's serial model), so it "
              "is as fast as the wire here; on a board it is the USB-UART at 115,200 baud to 3 Mbaud, a few hundred "
              "kB/s at most, which is what the Ethernet link replaces.", ""]
    DOC.write_text("\n".join(lines))
    plot(data)


def _read_bound(data: dict) -> list[str]:
    """A bullet saying what bounds reads through the drive, if the two links give the same figure."""
    reads = {c["link"]: c["Bps"] for c in data["drive"] if c["op"] == "read"}
    lo, hi = min(reads.values()), max(reads.values())
    if hi > 1.05 * lo:
        return []
    return [f"* Reads through the drive run at the same rate over both links ({mbs(lo)} to {mbs(hi)} MB/s): "
            "the drive bounds them, not the link (the FTL core serves reads a page at a time, "
            "docs/results/ftl_bench.md)."]


def plot(data: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wire = data["wire"]
    names = [c["link"] for c in data["links"]]
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], [c["write_Bps"] / 1e6 for c in data["links"]], 0.4, label="write")
    ax.bar([i + 0.2 for i in x], [c["read_Bps"] / 1e6 for c in data["links"]], 0.4, label="read")
    ax.axhline(wire["write_Bps"] / 1e6, ls="--", c="C0", lw=1, label="wire limit, writes")
    ax.axhline(wire["read_Bps"] / 1e6, ls=":", c="C1", lw=1, label="wire limit, reads")
    ax.set_xticks(list(x), names)
    ax.set_ylabel("MB/s (simulated time)")
    ax.set_title("Host memory over the link, 256 KiB each way")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(RESULTS / "etherbone_bench.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=int, default=400, help="commands per drive case")
    p.add_argument("--render", type=Path, default=None, help="rewrite the doc from this JSON, measure nothing")
    args = p.parse_args(argv)
    if args.render:
        data = json.loads(args.render.read_text())
    else:
        data = measure(args)
        (RESULTS / "etherbone_bench.json").write_text(json.dumps(data, indent=1) + "\n")
    render(data)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
