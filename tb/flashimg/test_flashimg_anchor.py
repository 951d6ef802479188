"""The campaign judge's reading of the anchor (`sim/flashimg.py`): on an MLC
part, where the firmware writes its anchor records on lower pages only
(firmware/anchor.c), the block's written prefix ends at its first upper page,
so the newest record is found only by reading the anchor block whole; and both
record formats (spec.ANCHOR.FORMAT_OLDEST..FORMAT), format 2's power-on
counters covered by its CRC.  Pure Python on model images: no simulation."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from atomflash import nandsim, spec  # noqa: E402
from sim import flashimg  # noqa: E402

PROFILE = spec.NAND_PROFILES["small"]
LAYOUT = spec.nand_page_layout(PROFILE)


def anchor_data(seq: int, fmt: int = spec.ANCHOR.FORMAT, *, flags: int = 0, power_cycles: int = 0,
                unsafe_shutdowns: int = 0, areas=(), plan=()) -> bytearray:
    """An intact anchor record's page data as firmware/anchor.c programs it (format 1: the header ends at
    nbad and its CRC skips the bytes after crc; format 2: 56 bytes, the CRC over all of them but crc).
    ``areas``: one page-0 PPA per area (narea 1, or 0 when empty)."""
    crc = spec.ANCHOR_HDR["crc"]
    h = dict(magic=spec.ANCHOR.MAGIC, format=fmt, flags=flags, seq=seq, base=seq, narea=len(areas) // spec.CKPT.AREAS,
             nplan=len(plan), nbad=0, power_cycles=power_cycles, unsafe_shutdowns=unsafe_shutdowns)
    size = spec.ANCHOR_HDR["power_cycles"].offset if fmt < 2 else spec.ANCHOR_HDR.size
    head = spec.ANCHOR_HDR.pack(h)[:size]
    lists = b"".join(w.to_bytes(4, "little") for w in (*areas, *plan))
    covered = head[:crc.offset] + (head[crc.offset + crc.size:] if fmt >= 2 else b"")
    h["crc"] = spec.crc32(covered + lists)
    return bytearray((spec.ANCHOR_HDR.pack(h)[:size] + lists).ljust(PROFILE.page_data, b"\0"))


def program_record(img: nandsim.Image, block: int, page: int, seq: int, data: bytes) -> None:
    oob = spec.pack_oob(kind=int(spec.Kind.CHECKPOINT), lba=spec.ANCHOR.OOB_LBA, seq=seq, vseq=seq)
    img.program(0, block, page, flashimg.encode_page(LAYOUT, flashimg.user_bytes(LAYOUT, bytes(data), oob)))


def anchor_page(seq: int) -> bytes:
    """An intact anchor record (no areas, no plan) as the firmware programs it: its page's user bytes."""
    oob = spec.pack_oob(kind=int(spec.Kind.CHECKPOINT), lba=spec.ANCHOR.OOB_LBA, seq=seq, vseq=seq)
    return flashimg.encode_page(LAYOUT, flashimg.user_bytes(LAYOUT, bytes(anchor_data(seq)), oob))


def test_the_newest_record_on_a_lower_page_past_an_unwritten_upper_page_is_found(tmp_path):
    cfgs = [nandsim.NandConfig("small", image=str(tmp_path / f"nand{i}.img"), blocks_per_lun=4, mlc_paired=1)
            for i in range(4)]
    images = flashimg.create_images(tmp_path, cfgs)
    lower = [p for p in range(PROFILE.pages_per_block) if spec.mlc_upper_of(p, PROFILE.pages_per_block) >= 0]
    assert lower[:3] == [0, 1, 3]                      # page 2 is page 0's upper page
    for seq, page in enumerate(lower[:3], 1):          # records 1, 2, 3 on the lower pages 0, 1, 3 of block 0
        images[0].program(0, 0, page, anchor_page(seq))
    images[0].program(0, 1, 0, flashimg.encode_page(LAYOUT, flashimg.user_bytes(
        LAYOUT, b"x" * 16, spec.pack_oob(kind=int(spec.Kind.DATA), lba=5, seq=9, vseq=9))))   # not an anchor block
    log = flashimg.read_log(images, LAYOUT, ways=2)
    assert flashimg.read_anchor(log, PROFILE.page_data).header.seq == 2   # the prefix stops at page 2
    whole = flashimg.read_anchor_blocks(images, LAYOUT)
    assert sorted(spec.PPA.decompose("ppa", p.addr).page for p in whole) == [0, 1, 3]   # block 1 is not read
    assert flashimg.read_anchor(log + whole, PROFILE.page_data).header.seq == 3


def test_both_record_formats_and_the_counters_format_2_covers(tmp_path):
    cfgs = [nandsim.NandConfig("small", image=str(tmp_path / f"nand{i}.img"), blocks_per_lun=4) for i in range(4)]
    images = flashimg.create_images(tmp_path, cfgs)
    area = [spec.pack_ppa(0, 1, 0, 2, 0), spec.pack_ppa(1, 0, 0, 3, 0)]
    plan = [spec.pack_ppa(1, 1, 0, 1, 0)]

    def newest(last_page: int) -> flashimg.AnchorRecord:
        pages = [p for p in flashimg.read_anchor_blocks(images, LAYOUT)
                 if spec.PPA.decompose("ppa", p.addr).page <= last_page]
        return flashimg.read_anchor(pages, PROFILE.page_data)

    # a format-1 record (as an older firmware wrote it) with a stray FLAG_SHUTDOWN_CLEAN bit: counters 0,
    # never clean; its lists right after its 40-byte header
    clean = spec.ANCHOR.FLAG_SHUTDOWN_CLEAN
    assert spec.ANCHOR.FORMAT_OLDEST == 1 < spec.ANCHOR.FORMAT == 2 and spec.ANCHOR_HDR.size == 56
    program_record(images[0], 0, 0, 1, anchor_data(1, 1, flags=clean, areas=area, plan=plan))
    rec = newest(0)
    assert (rec.header.format, rec.header.seq, rec.header.power_cycles, rec.header.unsafe_shutdowns) == (1, 1, 0, 0)
    assert not rec.header.flags & clean and rec.areas == [[area[0]], [area[1]]] and rec.plan == plan
    # format 2: its counters and flags
    program_record(images[0], 0, 1, 2, anchor_data(2, flags=clean, power_cycles=7, unsafe_shutdowns=3, areas=area,
                                                   plan=plan))
    rec = newest(1)
    assert (rec.header.format, rec.header.seq, rec.header.power_cycles, rec.header.unsafe_shutdowns) == (2, 2, 7, 3)
    assert rec.header.flags & clean and rec.areas == [[area[0]], [area[1]]] and rec.plan == plan
    # a format-2 record whose counters changed after its CRC was taken is not intact: the one before it is newest
    for field in ("power_cycles", "unsafe_shutdowns"):
        data = anchor_data(3, power_cycles=8, unsafe_shutdowns=3, areas=area, plan=plan)
        data[spec.ANCHOR_HDR[field].offset] ^= 1
        page = {"power_cycles": 2, "unsafe_shutdowns": 3}[field]
        program_record(images[0], 0, page, 3, data)
        assert newest(page).header.seq == 2, field
    # so is a record of a format this reader does not know
    program_record(images[0], 0, 4, 4, anchor_data(4, spec.ANCHOR.FORMAT + 1, power_cycles=9))
    assert newest(4).header.seq == 2
    program_record(images[0], 0, 5, 5, anchor_data(5, power_cycles=9, unsafe_shutdowns=4))
    assert (newest(5).header.seq, newest(5).header.power_cycles, newest(5).header.unsafe_shutdowns) == (5, 9, 4)
