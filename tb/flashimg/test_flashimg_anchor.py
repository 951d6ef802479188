"""The campaign judge's reading of the anchor (`sim/flashimg.py`) on an MLC
part, where the firmware writes its anchor records on lower pages only
(firmware/anchor.c): the block's written prefix ends at its first upper page,
so the newest record is found only by reading the anchor block whole.
Pure Python on model images: no simulation."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from atomflash import nandsim, spec  # noqa: E402
from sim import flashimg  # noqa: E402

PROFILE = spec.NAND_PROFILES["small"]
LAYOUT = spec.nand_page_layout(PROFILE)


def anchor_page(seq: int) -> bytes:
    """An intact anchor record (no areas, no plan) as the firmware programs it: its page's user bytes."""
    h = dict(magic=spec.ANCHOR.MAGIC, format=spec.ANCHOR.FORMAT, flags=0, rsvd0=0, seq=seq, base=seq,
             narea=0, nplan=0, nbad=0, crc=0)
    body = spec.ANCHOR_HDR.pack(h)
    h["crc"] = spec.crc32(body[:spec.ANCHOR_HDR["crc"].offset])
    data = spec.ANCHOR_HDR.pack(h).ljust(PROFILE.page_data, b"\0")
    oob = spec.pack_oob(kind=int(spec.Kind.CHECKPOINT), lba=spec.ANCHOR.OOB_LBA, seq=seq, vseq=seq)
    return flashimg.encode_page(LAYOUT, flashimg.user_bytes(LAYOUT, data, oob))


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
