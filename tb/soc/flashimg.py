"""Pre-written flash for the simulated SoC: NAND model images holding a
commit-flag log, exactly as the RTL controller would have programmed it.

* :func:`encode_page`: a page as the channel programs it with ECC
  (``atomflash.spec.nand_page_layout``): data codewords, the bad-block marker
  bytes (FFh) and the OOB record as one more codeword, then every codeword's
  BCH parity (``bchlib``, which the RTL encoder matches bit for bit).
* :class:`LogPlacement`: the reference log writer (``atomflash.model.LogFTL``)
  numbers pages ``block * pages_per_block + page`` on abstract flash; this maps
  its blocks onto good blocks of the targets, round-robin, and gives each page
  its spec PPA (what the firmware's map holds).
* :func:`program_images`: program the pages of a power cut (``LogFTL.cut``)
  into the images (``atomflash.nandsim.Image.create`` / ``program``), and
  return them as ``atomflash.model.recover`` should see them: in the
  firmware's scan order, addressed by PPA.  Pages can be made unreadable
  (parity destroyed: the controller reports UNCORRECTABLE); recover then gets
  them with a zeroed OOB, as the demo does: absent, never data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import bchlib

from atomflash import nandsim, spec
from atomflash.model import Page


def encode_page(layout: spec.NandPageLayout, user: bytes) -> bytes:
    """``user`` (data, then the spare user bytes: BBM + OOB record) with ECC parity, as programmed."""
    assert len(user) == layout.user_bytes
    bch = bchlib.BCH(layout.ecc.t, prim_poly=layout.ecc.prim_poly)
    page = bytearray(b"\xff" * layout.profile.page_bytes)
    page[:layout.user_bytes] = user
    for i in range(layout.codewords):
        col, n = layout.codeword_span(i)
        pcol, pn = layout.parity_span(i)
        page[pcol:pcol + pn] = bch.encode(bytes(user[col:col + n]))
    return bytes(page)


def user_bytes(layout: spec.NandPageLayout, data: bytes, oob: bytes) -> bytes:
    u = bytearray(b"\xff" * layout.user_bytes)
    u[:len(data)] = data
    u[layout.oob_record_col:layout.oob_record_col + len(oob)] = oob
    return bytes(u)


@dataclass
class LogPlacement:
    """Log blocks onto physical blocks: log block k -> the k-th good block in
    (block, channel, way) order, so consecutive log blocks land on different targets."""

    channels: int
    ways: int
    blocks_per_lun: int
    pages_per_block: int
    bad: set[tuple[int, int]] = field(default_factory=set)  # (target, block)

    def __post_init__(self):
        self.blocks = [(t, b) for b in range(self.blocks_per_lun) for t in range(self.channels * self.ways)
                       if (t, b) not in self.bad]

    def where(self, addr: int) -> tuple[int, int, int]:
        """(target, block, page) of log address ``addr``."""
        k, page = divmod(addr, self.pages_per_block)
        t, block = self.blocks[k]
        return t, block, page

    def ppa(self, addr: int) -> int:
        t, block, page = self.where(addr)
        return spec.pack_ppa(t // self.ways, t % self.ways, 0, block, page)

    def global_block(self, t: int, block: int) -> int:
        return t * self.blocks_per_lun + block  # one LUN per target

    def scan_key(self, ppa: int) -> tuple[int, int, int, int]:
        """The firmware's scan order: lun, block, page, channel, way."""
        f = spec.PPA.decompose("ppa", ppa)
        return f.lun, f.block, f.page, f.channel * self.ways + f.way


def program_images(images: list[nandsim.Image], layout: spec.NandPageLayout, place: LogPlacement,
                   pages: list[Page], *, unreadable: set[int] = frozenset(), seed: int = 0) -> list[Page]:
    """Program ``pages`` (log addresses) into ``images`` (one per target);
    returns what recover must see, in the firmware's scan order, by PPA."""
    rng = random.Random(seed)
    seen = []
    for p in pages:
        t, block, page = place.where(p.addr)
        content = encode_page(layout, user_bytes(layout, p.data, p.oob))
        oob = p.oob
        if p.addr in unreadable:  # far more bit errors than ECC corrects: UNCORRECTABLE
            broken = bytearray(content)
            for col in range(layout.oob_col, layout.oob_col + layout.oob_bytes):
                broken[col] ^= rng.randrange(1, 256)
            content = bytes(broken)
            oob = b"\0" * spec.OOB.size
        images[t].program(0, block, page, content)
        seen.append(Page(place.ppa(p.addr), oob, p.data))
    return sorted(seen, key=lambda q: place.scan_key(q.addr))


def create_images(run_dir: Path, cfgs: list[nandsim.NandConfig]) -> list[nandsim.Image]:
    """Fresh images for every target's config (as the model would create them)."""
    out = []
    for cfg in cfgs:
        path = Path(cfg["image"])
        path.unlink(missing_ok=True)
        Path(str(path) + ".stats.json").unlink(missing_ok=True)
        out.append(nandsim.Image.create(path, cfg))
    return out
