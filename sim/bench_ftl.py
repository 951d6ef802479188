"""``make bench-ftl``: the FTL core's throughput and map-cache figures in
simulated time, against the physical limit of the modelled NAND.

Realistic profile (4096+224 B pages, tPROG 230 us, tR 25 us), 2 channels x
4 ways, ONFI mode 5, the nominal 100 MHz clock.  The limit a write stream
can reach is the smaller of the array limit (dies x page / tPROG) and the
bus limit (channels x the bytes one program moves at tWC per byte).  Writes
docs/results/ftl_bench.md and its raw figures beside it, docs/results/ftl_bench.json, which other
benches read (``make bench-nvme`` compares the drive's host-visible throughput with them).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from atomflash import spec  # noqa: E402
from rtl.lib.siphash import cycles as siphash_cycles  # noqa: E402
from sim.harness import runner  # noqa: E402
from sim.harness.ftl_core import build  # noqa: E402
from sim.harness.nand_channel import model_plusargs  # noqa: E402

CHANNELS, WAYS, SLOTS, MODE = 2, 4, 16, 5
DOC = ROOT / "docs" / "results" / "ftl_bench.md"
CKPT_EVERY = 256       # cocotb_ftl_bench.CKPT_EVERY


def limits():
    prof = spec.NAND_PROFILES["realistic"]
    lay = spec.nand_page_layout(prof)
    dies = CHANNELS * WAYS
    array_pages_s = dies / (prof.t_prog_ns * 1e-9)
    t_wc_ns = spec.ONFI_TIMING["tWC"][MODE]
    bus_bytes = lay.user_bytes + lay.parity_bytes      # what one program moves over the bus
    bus_pages_s = CHANNELS / (bus_bytes * t_wc_ns * 1e-9)
    return dict(array_pages_s=array_pages_s, bus_pages_s=bus_pages_s, bus_bytes=bus_bytes, t_wc_ns=t_wc_ns,
                limit_pages_s=min(array_pages_s, bus_pages_s), page=prof.page_data, dies=dies,
                t_prog_us=prof.t_prog_ns / 1000)


def read_limits():
    """What a read stream can reach: the array (dies / tR) and the bus (the bytes a read moves at tRC)."""
    prof = spec.NAND_PROFILES["realistic"]
    lay = spec.nand_page_layout(prof)
    t_rc_ns = spec.ONFI_TIMING["tRC"][MODE]
    bus_bytes = lay.user_bytes + lay.parity_bytes
    array_pages_s = CHANNELS * WAYS / (prof.t_r_ns * 1e-9)
    bus_pages_s = CHANNELS / (bus_bytes * t_rc_ns * 1e-9)
    return dict(array_pages_s=array_pages_s, bus_pages_s=bus_pages_s, limit_pages_s=min(array_pages_s, bus_pages_s),
                t_r_us=prof.t_r_ns / 1000, t_rc_ns=t_rc_ns, bus_bytes=bus_bytes)


CACHE_PAGES = 64       # the write-cache build: 8 stripes of 2 x 4 pages (256 KiB)
READ_SLOTS = 4         # the reads build: read slots per channel, besides the other builds' slots
READ_COMMANDS = 32     # the reads build: READ commands between lookup and completion (the host's queue depth)


def run(nand_slots: int, pages: int, cache: bool = False, test: str | None = None, read_slots: int = 1,
        read_commands: int = 16) -> dict:
    """The ``bench`` test on the cache-less build, or ``bench_cache`` on the write-cache build
    (``test``: another test of the cache-less build, ``bench_mlc``; ``bench_reads`` with
    ``read_slots``, a build of its own)."""
    args = build("realistic", CHANNELS, WAYS, SLOTS, nand_slots=nand_slots, cache_pages=CACHE_PAGES if cache else 0,
                 read_slots=read_slots, read_commands=read_commands, test_dir=HERE)
    slot_words = args.pop("slot_words")
    with tempfile.TemporaryDirectory(dir=runner.BUILD) as tmp:
        out = Path(tmp) / "bench.json"
        runner.run(test_module="cocotb_ftl_bench", plusargs=model_plusargs(Path(tmp), "realistic", CHANNELS * WAYS),
                   extra_env={"NANDTB_SLOT_WORDS": str(slot_words), "FTL_SLOTS": str(SLOTS),
                              "FTL_BENCH_OUT": str(out), "FTL_BENCH_PAGES": str(pages),
                              "FTL_CACHE_PAGES": str(CACHE_PAGES if cache else 0),
                              "FTL_READ_SLOTS": str(read_slots)},
                   testcase=[test or ("bench_cache" if cache else "bench")], **args)
        return json.loads(out.read_text()) | {"nand_slots": nand_slots}


def run_mlc(nand_slots: int, pages: int) -> dict:
    """``bench_mlc`` on the cache-less build, and ``bench_mlc_cache`` (QD 16 through the write cache,
    then a FLUSH) on the write-cache build."""
    return run(nand_slots, pages, test="bench_mlc") | {
        "qd16_mlc_cache": run(nand_slots, pages, cache=True, test="bench_mlc_cache")}


def run_reads(nand_slots: int, pages: int) -> dict:
    """``bench_reads`` on a build with ``READ_SLOTS`` read slots per channel (the program slots as in
    ``nand_slots``) and a window of ``READ_COMMANDS`` commands."""
    return run(nand_slots - 1 + READ_SLOTS, pages, test="bench_reads", read_slots=READ_SLOTS,
               read_commands=READ_COMMANDS) | {"read_commands": READ_COMMANDS}


def render(r: dict) -> str:
    lim = limits()
    clk = r["clk_hz"]
    page = lim["page"]

    def rate(pages, cycles):
        return pages / (cycles / clk)

    rows = []
    w = r["random_write"]
    base = rate(r["pages"], w["cycles"])
    rows.append(("4 KiB random writes, QD 16", r["pages"], w["cycles"], base, w["programs"]))
    if "random_write_qd8" in r:
        w8 = r["random_write_qd8"]
        rows.append(("4 KiB random writes, QD 8", r["pages"], w8["cycles"], rate(r["pages"], w8["cycles"]),
                     w8["programs"]))
    for n in (8, 64):
        a = r[f"atomic_{n}"]
        rows.append((f"atomic groups of {n} pages ({a['groups']} groups, 4 in flight)", r["pages"], a["cycles"],
                     rate(r["pages"], a["cycles"]), a["programs"]))
    if "append_remap_8" in r:
        a = r["append_remap_8"]
        rows.append((f"APPENDs of 8 pages, each REMAPped ({a['appends']} tokens minted and checked, 4 in flight)",
                     r["pages"], a["cycles"], rate(r["pages"], a["cycles"]), a["programs"]))
    lines = [
        "# FTL core benchmark",
        "",
        "Generated by `make bench-ftl` (`sim/bench_ftl.py`); do not edit by hand.",
        "",
        f"The FTL core (`rtl/ftl/core.py`) in Verilator against {lim['dies']} NAND models: realistic profile "
        f"({page} B pages, tPROG {lim['t_prog_us']:.0f} us), {r['channels']} channels x {r['ways']} ways, "
        f"ONFI mode {MODE}, {r['slots']} publisher slots, {r['nand_slots']} page-buffer slots per channel "
        f"({r['nand_slots'] - 3} for programs, one each for the firmware, GC relocation and reads), {clk / 1e6:.0f} MHz nominal "
        "clock.  Times are simulated "
        "cycles, so every figure is exact and repeatable.",
        "",
        "## Limits of the modelled NAND",
        "",
        f"* array: dies x page / tPROG = {lim['array_pages_s']:,.0f} pages/s "
        f"({lim['array_pages_s'] * page / 1e6:.1f} MB/s)",
        f"* bus: {r['channels']} channels x 1 / ({lim['bus_bytes']} B per program x tWC {lim['t_wc_ns']} ns) = "
        f"{lim['bus_pages_s']:,.0f} pages/s ({lim['bus_pages_s'] * page / 1e6:.1f} MB/s)",
        f"* the limit a write stream can reach: **{lim['limit_pages_s']:,.0f} pages/s**",
        "",
        "## Writes",
        "",
        "| workload | pages | cycles | pages/s | MB/s | of the limit | flash programs |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, pages, cycles, pps, progs in rows:
        lines.append(f"| {name} | {pages} | {cycles:,} | {pps:,.0f} | {pps * page / 1e6:.1f} | "
                     f"{100 * pps / lim['limit_pages_s']:.1f}% | {progs} |")
    lines += [""]
    for n in (8, 64):
        a = r[f"atomic_{n}"]
        lines.append(f"* atomic groups of {n}: {100 * rate(r['pages'], a['cycles']) / base:.1f}% of the plain-write "
                     f"throughput, {a['programs'] - r['pages']} extra flash programs")
    if "append_remap_8" in r:
        a = r["append_remap_8"]
        mac = siphash_cycles(spec.TOKEN_MAC_IN.size // 8)
        lines.append(f"* append-then-remap: {100 * rate(r['pages'], a['cycles']) / base:.1f}% of the plain-write "
                     f"throughput, {a['programs'] - r['pages']} extra flash programs (the REMAP records); each "
                     "token's check is SipHash-2-4 under the boot's key (docs/security.md), minted in "
                     f"{mac} cycles while the append's pages program: {100 * mac * a['appends'] / a['cycles']:.2f}% "
                     "of the run's "
                     "cycles even if nothing overlapped them")
    if "tx_1_commit" in r:
        lines += ["", "## Transactions", "",
                  f"{r['pages']} pages written as transactions of k pages (one TX_WRITE of k pages each), "
                  "committed by TX_COMMIT (a COMMIT record page) or by marking the write final (the commit rides "
                  "on its last page, `OOB.flags.tx_final`); 4 transactions in flight.  Goal: at most k + 1 flash "
                  "programs per transaction, exactly k with the final write.", "",
                  "| k | commit | transactions | flash programs | per transaction | pages/s | of plain writes |",
                  "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
        for k in (1, 8, 64):
            for how in ("commit", "final"):
                x = r[f"tx_{k}_{how}"]
                lines.append(f"| {k} | {'TX_COMMIT' if how == 'commit' else 'final write'} | {x['transactions']} | "
                             f"{x['programs']} | {x['programs'] / x['transactions']:.2f} | "
                             f"{rate(r['pages'], x['cycles']):,.0f} | "
                             f"{100 * rate(r['pages'], x['cycles']) / base:.1f}% |")
    if "hot_zipf_cache" in r:
        lines += ["", "## Write cache: hot-spot overwrites", "",
                  f"The same traces on a build with a {r['cache_pages']}-page volatile write cache "
                  f"({r['cache_pages'] * page // 1024} KiB of SoC memory, "
                  f"{r['cache_pages'] // lim['dies']} stripes of {lim['dies']} pages) and on the cache-less build: "
                  f"{r['hot_zipf_cache']['writes']} single-page writes at QD {r['qd']}, a HINT(CHECKPOINT) after every "
                  f"{CKPT_EVERY} writes and at the end (it drains the cache, so the whole trace is durable when the "
                  "run ends).  Flash programs are the NAND models' own count.", "",
                  "| trace | distinct LBAs | cache | flash programs | pages coalesced | stripes filled | "
                  "programs saved | pages/s | speed-up |",
                  "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for name, label in (("zipf", "Zipf (s = 0.99) over 1,024 LBAs"), ("80_20", "80/20 over 256 LBAs")):
            off, on = r[f"hot_{name}_nocache"], r[f"hot_{name}_cache"]
            runs = [("none", off), (f"{r['cache_pages']} pages", on)]
            if f"hot_{name}_cache_end" in r:
                runs.append((f"{r['cache_pages']} pages, checkpoint at the end only", r[f"hot_{name}_cache_end"]))
            for key, x in runs:
                lines.append(f"| {label} | {x['distinct']} | {key} | {x['programs']} | "
                             f"{x['coalesced'] if key != 'none' else '-'} | "
                             f"{x['stripes'] if key != 'none' else '-'} | "
                             f"{off['programs'] / x['programs']:.2f}x | {rate(x['writes'], x['cycles']):,.0f} | "
                             f"{off['cycles'] / x['cycles']:.2f}x |")
    lines += ["", "## Map cache (reads only, single pages, QD 8, over the whole capacity)", "",
              "| distribution | reads | map hits | map misses | hit rate |", "| --- | ---: | ---: | ---: | ---: |"]
    for name in ("uniform", "zipf"):
        x = r[f"reads_{name}"]
        total = x["hits"] + x["misses"]
        lines.append(f"| {name}{' (s = 0.99)' if name == 'zipf' else ''} | {r['reads']} | {x['hits']} | "
                     f"{x['misses']} | {100 * x['hits'] / max(total, 1):.1f}% |")
    hit = [s["cycles"] for s in r["read_latency"] if s["map_miss"] == 0]
    miss = [s["cycles"] for s in r["read_latency"] if s["map_miss"] > 0]
    lines += ["", "## Read latency of a written page at QD 1", "",
              "Submission to completion as the host sees it (doorbell write, fetch, lookup, tR, ECC, copy, "
              "completion entry), in cycles:", "",
              "| map | samples | median cycles | median us |", "| --- | ---: | ---: | ---: |"]
    for name, xs in (("hit", hit), ("miss", miss)):
        if xs:
            med = statistics.median(xs)
            lines.append(f"| {name} | {len(xs)} | {med:,.0f} | {med / clk * 1e6:.1f} |")
    bus_us = lim["bus_bytes"] * lim["t_wc_ns"] / 1000
    need = (bus_us + lim["t_prog_us"]) / bus_us
    lines += ["", "## Reading the figures", "",
              "* Atomicity costs no flash program: a group's commit point is the commit bit on its last member, "
              "and the publisher binds the group when its last member is programmed, so groups stream like plain "
              "writes.",
              f"* A program holds its page-buffer slot from the DMA fill through the bus transfer ({bus_us:.0f} us) "
              f"and tPROG ({lim['t_prog_us']:.0f} us), so a channel needs more than {need:.1f} program slots to "
              f"keep its bus busy; this run has {r['nand_slots'] - 3} per channel.  With 3 program slots per channel "
              "(`--nand-slots 6`) the same workload reached 75.1% of the limit.",
              "* Before an ATOMIC_WRITE's first program its list is read and checked: the duplicate check compares "
              "one pair of entries a cycle, n(n-1)/2 + 3n - 2 cycles for n entries (rtl/ftl/listcheck.py).",
              "* The log writer's DMA (a classic-Wishbone word copier, a word per two cycles plus the memory's "
              "wait state, about 20 us per page) fills one slot at a time; it is the next limit once the bus is "
              "faster (more channels, NV-DDR).",
              "* Transactions cost exactly one extra flash program (the COMMIT record) with TX_COMMIT and none when the "
              "write is marked final.  Their throughput is bounded by the transactions in flight: this build has 4 "
              "transaction slots (the harness's `max_open_tx`), so one-page transactions keep at most 4 pages in "
              "flight where the plain writes had 16; from 8 pages on they stream near the plain-write rate.",
              "* The map-cache and QD 1 latency figures above are from this build, with one read slot per channel: "
              "a channel's next read waits for the copy of the one before (the reads section below runs a build "
              "with a read slot per die).  A read's latency is its whole path (lookup, tR, transfer, ECC, copy); "
              "map hits and misses differ by one line fill.",
              ""]
    if "hot_zipf_cache" in r:
        on = r["hot_zipf_cache"]
        per_page = on["cycles"] / on["writes"]
        lines[-1:] = [
            "* Write cache: every overwrite of a buffered LBA is a flash program saved (programs = pages in - "
            "pages coalesced), so the saving is what the cache's residency catches of the trace's reuse; the "
            "destage keeps the least recently written pages, so the hot ones stay.  Destages fill whole stripes "
            "except at the checkpoints' drains (the pages destaged beyond the full stripes).  The hint paper "
            "reports 1.52x to 2.02x from coalescing within its checkpoint intervals.",
            f"* With the cache a host page is copied into its cache page in bursts (`rtl/lib/memcopy.py`, "
            f"about two bus cycles a word); the traces ran at {per_page:,.0f} cycles per {page} B page with the "
            "drains.  " + ("The speed-up column is >= 1: buffered writes run at least at the cache-less rate "
                           "while programming fewer pages." if min(r[f"hot_{n}_nocache"]["cycles"] /
                                                                  r[f"hot_{n}_cache"]["cycles"]
                                                                  for n in ("zipf", "80_20")) >= 1 else
                           "The speed-up column is < 1 on a trace: the cache's fills and destages then bound "
                           "the host's write rate below the cache-less one."),
            ""]
        if "hot_zipf_cache_end" in r:
            end = {n: r[f"hot_{n}_nocache"]["cycles"] / r[f"hot_{n}_cache_end"]["cycles"] for n in ("zipf", "80_20")}
            lines[-1:] = [
                "* What the checkpoints cost: a HINT(CHECKPOINT) destages every dirty page (up to the cache's "
                "size) at the bus rate, and the writes behind it wait for the pages those destages free.  With "
                f"the checkpoint at the end only the same traces run at {end['zipf']:.2f}x (Zipf) and "
                f"{end['80_20']:.2f}x (80/20) the cache-less rate.",
                ""]
    if "reads" in r:
        lines += render_reads(r["reads"], lim)
    if "mlc" in r:
        lines += render_mlc(r["mlc"], lim, clk)
    return "\n".join(lines)


def render_reads(rd: dict, lim: dict) -> list[str]:
    """The reads section (``bench_reads``)."""
    rl = read_limits()
    clk, page, R = rd["clk_hz"], spec.NAND_PROFILES["realistic"].page_data, rd["read_slots"]
    lines = ["", "## Reads at the limit", "",
             f"A build of its own with {R} read slots per channel ({rd['nand_slots']} page-buffer slots: the "
             f"programs keep theirs), so a channel has a read in flight on each of its {WAYS} dies, and a window "
             f"of {rd.get('read_commands', 16)} READ commands (the host's queue depth) to find them work in.  "
             f"A region of {rd['region']} LBAs is written sequentially, then read; every read's data is checked.", "",
             f"* array: dies x page / tR ({rl['t_r_us']:.0f} us) = {rl['array_pages_s']:,.0f} pages/s",
             f"* bus: {CHANNELS} channels x 1 / ({rl['bus_bytes']} B per read x tRC {rl['t_rc_ns']} ns) = "
             f"{rl['bus_pages_s']:,.0f} pages/s ({rl['bus_pages_s'] * page / 1e6:.1f} MB/s)",
             f"* the limit a read stream can reach: **{rl['limit_pages_s']:,.0f} pages/s**", "",
             "| workload | pages | cycles | pages/s | MB/s | of the limit |", "| --- | ---: | ---: | ---: | ---: | ---: |"]

    def row(name, pages, cycles, limit):
        pps = pages / (cycles / clk)
        lines.append(f"| {name} | {pages} | {cycles:,} | {pps:,.0f} | {pps * page / 1e6:.1f} | "
                     f"{100 * pps / limit:.1f}% |")
    for qd in (1, 8, 32):
        x = rd[f"random_qd{qd}"]
        row(f"4 KiB random reads, QD {qd}", x["pages"], x["cycles"], rl["limit_pages_s"])
    x = rd["sequential_64k_qd4"]
    row("64 KiB sequential reads, QD 4", x["pages"], x["cycles"], rl["limit_pages_s"])
    x = rd["mixed_70_30_qd32"]
    n = x["reads"] + x["writes"]
    # a page read and a page program both hold the bus for a page's bytes: the mix's limit weighs the two
    mixed_limit = 1 / (x["reads"] / n / rl["limit_pages_s"] + x["writes"] / n / lim["limit_pages_s"])
    row(f"4 KiB random 70/30 reads/writes, QD 32 ({x['reads']} reads, {x['writes']} writes)", n, x["cycles"],
        mixed_limit)
    lat = statistics.median(rd["latency_qd1"])
    split = rd["random_qd32"].get("channel_reads")      # array reads per channel
    lines += ["", f"Read latency at QD 1 (a map hit), submission to completion: median {lat:,.0f} cycles "
              f"({lat / clk * 1e6:.1f} us) over {len(rd['latency_qd1'])} reads.", "",
              "* Random reads draw each LBA of the region at most once (as fio's random map does); the region is "
              "striped over every die, channels first, so the channels share the reads"
              + (f" (QD 32: {' / '.join(str(v) for v in split)} array reads per channel)" if split else "") + ".",
              "* At QD 8 a die has one command on average: a die whose queue is empty waits for the host's next "
              "command and then for its tR while the other dies cannot fill the bus alone; at QD 32 about four "
              "reads wait per die.",
              "* A read holds its slot from the descriptor through tR, the page's transfer and ECC, to the end of "
              "its copy to the host buffer; the channel runs the other dies' tR and transfers meanwhile, and the "
              "reader completes commands in the order they came.",
              f"* The mix's limit weighs the read limit and the write limit ({lim['limit_pages_s']:,.0f} pages/s) "
              "by the mix's shares: both are the bus's.", ""]
    return lines


def render_mlc(m: dict, lim: dict, clk: float) -> list[str]:
    """The MLC paired-page section (``bench_mlc``)."""
    tprog = lim["t_prog_us"] * 1e-6 * clk
    out = ["", "## MLC paired pages", "",
           "The same core and NAND models with paired pages (`mlc_paired`: a cut in an upper page damages its "
           "lower page) and the core's `pairing.mlc` on (`rtl/ftl/pairing.py`): a lower page's completion waits "
           "for its word line's upper page; an idle log pads exposed lower pages and pre-pads dies whose next "
           "page is a lower page, on dies with no program in flight.  4 KiB random writes; at QD 1 the host submits the next write "
           f"{m['host_gap']} cycles after a completion; 2,000 idle cycles after each run count its last PADs. "
           "Flash programs are the NAND models' own count, PADs included.", "",
           "| writes | mlc | cycles per write | per tPROG | flash programs per write | PAD pages | pages/s |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    rows = [("qd1_slc", "QD 1", "off"), ("qd1_mlc", "QD 1", "on"), ("qd16_mlc", "QD 16", "on")]
    if "qd16_mlc_cache" in m:
        rows.append(("qd16_mlc_cache", f"QD 16 + FLUSH, {m['qd16_mlc_cache']['cache_pages']}-page write cache", "on"))
    for key, label, mlc in rows:
        x = m[key]
        per = x["cycles"] / x["writes"]
        out.append(f"| {label}, {x['writes']} | {mlc} | {per:,.0f} | "
                   f"{per / tprog:.2f} | {x['programs'] / x['writes']:.2f} | {x['pads']} | "
                   f"{x['writes'] / (x['cycles'] / clk):,.0f} |")
    q = m["qd16_mlc"]
    qd, dies = q["qd"], lim["dies"]
    t_bus = lim["bus_bytes"] * lim["t_wc_ns"] * 1e-9
    t_prog = lim["t_prog_us"] * 1e-6

    def little(d):
        """Little's law for QD 16 over ``d`` dies taking pages in turn: an upper page completes a bus
        transfer and a program after it is sent, a lower page only once three more pages have come to its
        die (at X / d per die) and the last is programmed; half the writes are lower pages, so
        qd = X (t_bus + t_prog) + 1.5 d, capped by the bus and by the dies' programs."""
        return min((qd - 1.5 * d) / (t_bus + t_prog), lim["bus_pages_s"], d / t_prog)
    got = q["writes"] / (q["cycles"] / clk)
    out += ["", f"* QD 16 with pairing on: {100 * got / lim['limit_pages_s']:.1f}% of the limit, {q['pads']} PAD "
            f"pages ({100 * q['pads'] / q['writes']:.1f}% of the writes).",
            "* QD 1: a lone write lands on a pre-padded die's upper page, complete once programmed; the PAD "
            "that readies the die for the next one is programmed while the host is away.",
            f"* What bounds QD 16: with the log striped over all {dies} dies, a write on a lower page waits for "
            f"three more pages on its die, which come every {dies} pages.  Little's law ({qd} commands = pages/s x "
            "mean completion time, half of them lower pages) then allows at most "
            f"{little(dies):,.0f} pages/s, {100 * little(dies) / lim['limit_pages_s']:.0f}% of the limit, before any "
            f"queueing: the run reaches {100 * got / little(dies):.0f}% of that.  A PAD is programmed only on a die "
            "with nothing in flight (a page there, or the host's next one, may still complete the word line with "
            "data; a PAD queued behind it would hold the die a whole program more, and every page sent there next "
            "behind it).  80% of the limit at QD 16 "
            "needs the log on fewer dies at a time (on 6 the same law allows "
            f"{100 * little(6) / lim['limit_pages_s']:.0f}%) or more pages in flight than the host's {qd} commands."]
    if "qd16_mlc_cache" in m:
        c = m["qd16_mlc_cache"]
        got_c = c["writes"] / (c["cycles"] / clk)
        inflight = qd - 1.5 * dies                      # what Little's law leaves the log at the limit
        need = lim["limit_pages_s"] * (t_bus + t_prog) + 1.5 * dies
        out += [f"* More pages in flight, through the write cache: the same {c['writes']} writes at QD {qd} on the "
                f"build with a {c['cache_pages']}-page write cache, then a FLUSH, so every write is durable when the "
                f"run ends (the FLUSH's {c['flush_cycles']:,} cycles count): {100 * got_c / lim['limit_pages_s']:.1f}% "
                f"of the limit, {c['pads']} PAD pages.  The cache acknowledges a write once its page is in SoC memory "
                "and, with paired pages, destages every whole stripe of dirty pages, keeping at most one stripe "
                "resident (`deep`, `rtl/ftl/writecache.py`), so up to "
                f"{c['cache_pages'] - dies} pages are in flight: at the limit the same law needs {need:.0f} "
                f"({inflight:.0f} of the host's {qd} would be left to the log without the cache).  Without paired "
                "pages the cache keeps two stripes in flight and the rest resident, to be coalesced (the cache "
                "section above).", ""]
    else:
        out.append("")
    return out


def replace_section(a, key: str, figures: dict, render_section, heading: str, following: str | None = None):
    """Put one section, rendered from ``figures``, into the report in place of its old one (before
    ``following``'s heading, else at the end), and its figures into the raw JSON under ``key``."""
    text = a.out.read_text()
    head, _, tail = text.partition(f"\n{following}\n") if following else (text, "", "")
    head = head.split(f"\n{heading}\n")[0].rstrip("\n") + "\n"
    text = head + "\n".join(render_section(figures)) + (f"\n{following}\n{tail}" if following else "")
    a.out.write_text(text)
    raw = a.json or a.out.with_suffix(".json")
    if raw.exists():
        raw.write_text(json.dumps(json.loads(raw.read_text()) | {key: figures}, indent=1))
    print(text)
    print(f"wrote {a.out}")


def main():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nand-slots", type=int, default=spec.NAND_DEFAULTS.SLOTS,
                    help="page-buffer slots per channel (FtlCore nand_slots; three are the firmware's, the relocator's and the reader's)")
    ap.add_argument("--pages", type=int, default=512, help="pages per write workload (reads: half as many)")
    ap.add_argument("--out", type=Path, default=DOC, help="markdown report (default docs/results/ftl_bench.md)")
    ap.add_argument("--json", type=Path, help="the raw figures (default: beside the report, ftl_bench.json)")
    ap.add_argument("--render", type=Path, help="only re-render the report from raw figures saved with --json")
    ap.add_argument("--cache-json", type=Path, help="the write-cache build's figures from an earlier run (its JSON: "
                                                   "skips that build and run)")
    ap.add_argument("--mlc-only", action="store_true",
                    help="run bench_mlc alone and replace the report's MLC section (the rest stays as it is)")
    ap.add_argument("--mlc-json", type=Path, help="with --mlc-only: bench_mlc's figures from an earlier run")
    ap.add_argument("--reads-only", action="store_true",
                    help="run bench_reads alone (its own build) and replace the report's reads section")
    a = ap.parse_args()
    if a.reads_only:
        replace_section(a, "reads", run_reads(a.nand_slots, a.pages), lambda rd: render_reads(rd, limits()),
                        "## Reads at the limit", following="## MLC paired pages")
        return
    if a.mlc_only:
        m = json.loads(a.mlc_json.read_text()) if a.mlc_json else run_mlc(a.nand_slots, a.pages)
        replace_section(a, "mlc", m, lambda x: render_mlc(x, limits(), spec.NAND_CLK_HZ), "## MLC paired pages")
        return
    if a.render:
        r = json.loads(a.render.read_text())
    else:
        cached = json.loads(a.cache_json.read_text()) if a.cache_json else run(a.nand_slots, a.pages, cache=True)
        r = run(a.nand_slots, a.pages) | cached | {"reads": run_reads(a.nand_slots, a.pages),
                                                   "mlc": run_mlc(a.nand_slots, a.pages)}
    (a.json or a.out.with_suffix(".json")).write_text(json.dumps(r, indent=1))
    text = render(r)
    a.out.write_text(text)
    print(text)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
