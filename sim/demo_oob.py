#!/usr/bin/env python3
"""The first demo (`python sim/demo_oob.py`): the commit-flag log's OOB stamping: a small log (plain writes,
an atomic group of four pages whose last member carries the commit bit, a
transaction page) is stamped by the RTL OOB packer running in Verilator, then
every record is decoded and checked by the Python side of the spec.  """

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from atomflash import spec  # noqa: E402
from rtl.ftl.oob import OOBPacker  # noqa: E402
from sim.harness import runner  # noqa: E402

HERE = Path(__file__).parent


def demo_log() -> list[dict]:
    """A short log: what the log writer would stamp for a few host commands."""
    log, seq = [], 100
    for lba in (7, 8):  # two plain writes: each page is its own commit point
        log.append(dict(kind=spec.Kind.DATA, lba=lba, seq=seq, vseq=seq, group_len=1,
                        flags=spec.OOB.compose("flags", commit=1)))
        seq += 1
    group = [42, 3, 1000, 9]  # one atomic group, non-contiguous LBAs
    first = seq
    for idx, lba in enumerate(group):
        last = idx == len(group) - 1
        log.append(dict(kind=spec.Kind.DATA, lba=lba, seq=seq, vseq=first + idx,
                        group_len=len(group), group_idx=idx,
                        flags=spec.OOB.compose("flags", commit=int(last))))
        seq += 1
    tag = spec.tag_of(seq)  # a transaction's pages carry its tag: the low bits of its first vseq
    log.append(dict(kind=spec.Kind.DATA, lba=5, seq=seq, vseq=seq, group_len=1, tid=tag,
                    flags=spec.OOB.compose("flags", tx=1)))
    log.append(dict(kind=spec.Kind.COMMIT, seq=seq + 1, vseq=seq + 1, group_len=1, tid=tag,
                    flags=spec.OOB.compose("flags", commit=1)))
    return log


def main() -> int:
    console = Console()
    console.rule("[bold]atomflash demo: commit-flag OOB records stamped by the RTL")
    log = demo_log()
    work = runner.BUILD / "demo"
    work.mkdir(parents=True, exist_ok=True)
    (work / "log.json").write_text(json.dumps([{k: int(v) for k, v in r.items()} for r in log]))
    console.print("elaborating rtl.ftl.oob.OOBPacker -> Verilog -> Verilator ...")
    verilog = runner.amaranth_verilog(OOBPacker(), "oob_packer")
    runner.run(toplevel="oob_packer", sources=[verilog], test_module="demo_oob_cocotb",
               build_name="oob_packer", test_dir=HERE,
               extra_env={"DEMO_LOG": str(work / "log.json"), "DEMO_OUT": str(work / "stamped.json")})
    stamped = [bytes.fromhex(h) for h in json.loads((work / "stamped.json").read_text())]

    table = Table(title="log as stamped by the RTL (decoded by atomflash.spec)")
    for col in ("seq", "kind", "lba", "tid", "group", "commit", "crc", "RTL == Python"):
        table.add_column(col)
    ok = True
    for want, raw in zip(log, stamped):
        rec = spec.unpack_oob(raw)
        same = raw == spec.pack_oob(**want)
        ok &= rec is not None and same
        flags = spec.OOB.decompose("flags", rec.flags)
        table.add_row(str(rec.seq), spec.Kind(rec.kind).name, str(rec.lba), str(rec.tid),
                      f"{rec.group_idx + 1}/{rec.group_len}", "1" if flags.commit else "0",
                      f"{rec.crc:08x}", "[green]yes" if same else "[red]NO")
    console.print(table)
    torn = bytearray(stamped[-1])
    torn[9] ^= 0x10
    console.print(f"a torn copy of the last record (one bit flipped) decodes as: "
                  f"{spec.unpack_oob(bytes(torn))!r}  (absent, never data)")
    console.print("[bold green]demo passed" if ok else "[bold red]demo FAILED: RTL and Python disagree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
