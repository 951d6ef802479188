"""Shared pieces of the FTL core's cocotb modules (``cocotb_*.py`` here): the geometry and memory
layout every test uses, :func:`make_tb` (an :class:`~sim.harness.ftl_tb.FtlCoreTB` on four NAND
models), unique data blocks, host data buffers and the checks several tests make.

The geometry and the write cache come from the environment ``test_ftl_core.py`` sets:
``NANDTB_SLOT_WORDS``, ``FTL_SLOTS``, ``FTL_CACHE_PAGES``.
"""

import os
import random

from atomflash import spec
from atomflash.spec import Opcode, Status
from rtl.ftl.mapcache import MapOp
from sim.harness.ftl_tb import FtlCoreTB


CHANNELS, WAYS = 2, 2
SLOTS = int(os.environ.get("FTL_SLOTS", "8"))
SLOT_WORDS = int(os.environ["NANDTB_SLOT_WORDS"])
CAPACITY = 2048
MEM_END = 1 << 19


CACHE_PAGES = int(os.environ.get("FTL_CACHE_PAGES", "0"))     # the write-cache build (test_ftl_core_write_cache)
CACHE_BASE = 0x60000


async def make_tb(dut, **kw):
    tb = await FtlCoreTB.create(dut, channels=CHANNELS, ways=WAYS, slots=SLOTS, slot_words=SLOT_WORDS,
                                capacity=CAPACITY, **kw)
    dut.cache_base.value = CACHE_BASE      # used by the write-cache build only
    return tb


def block(tag: int, page: int) -> bytes:
    """A unique, recognisable block."""
    rng = random.Random(tag)
    return tag.to_bytes(8, "little") + rng.randbytes(page - 8)


class Blocks:
    """Consecutive unique blocks from ``first`` on: ``blocks(n)`` is the data of the next n."""

    def __init__(self, page: int, first: int):
        self.page, self.serial = page, first

    def __call__(self, n: int) -> bytes:
        out = []
        for _ in range(n):
            self.serial += 1
            out.append(block(self.serial, self.page))
        return b"".join(out)


class Host:
    """Data buffers in the harness memory, handed out round-robin."""

    def __init__(self, tb: FtlCoreTB, pages: int = 128):
        self.tb, self.pages, self.next = tb, pages, 0

    def buffer(self, nlb=1) -> int:
        if self.next + nlb > self.pages:
            self.next = 0
        addr = self.tb.data + self.next * self.tb.page
        self.next += nlb
        return addr

    def atomic_list(self, pairs) -> int:
        """Each (lba, block) into a buffer of its own, then the ATOMIC_ENTRY list; the list's address."""
        entries = []
        for lba, data in pairs:
            buf = self.buffer()
            self.tb.write_bytes(buf, data)
            entries.append(spec.ATOMIC_ENTRY.pack(lba=lba, buf=buf))
        lst = self.buffer()
        self.tb.write_bytes(lst, b"".join(entries))
        return lst


def expect(cpl, status):
    assert Status(cpl["status"]) == status, f"status {Status(cpl['status']).name}, expected {status.name}"


async def check_valid_counts(tb, model):
    """The block table (valid pages per block, in SoC memory) counts exactly the pages the device's map binds
    for the model's LBAs (the device's map, not recovery's: recovery may name an original where the device
    binds its GC copy of the same version)."""
    want = {}
    for lba in model.contents():
        ppa = (await tb.map_op(MapOp.READ, lba=lba))["old"]
        f = spec.PPA.decompose("ppa", ppa)
        die = (f["lun"] * WAYS + f["way"]) * CHANNELS + f["channel"]
        want[(die, f["block"])] = want.get((die, f["block"]), 0) + 1
    for die in range(tb.dies):
        for blk in tb.blocks_used[die]:
            got = tb.mem_read(tb.block_table // 4 + (die << tb.block_shift) + blk)
            assert got == want.get((die, blk), 0), (die, blk, got, want.get((die, blk), 0))


async def read_and_compare(tb, host, model, lba, nlb=1):
    """READ lba..lba+nlb-1 into a buffer filled with a pattern first; each block must be the model's."""
    page = tb.page
    buf = host.buffer(nlb)
    tb.write_bytes(buf, b"\xa5" * (nlb * page))
    expect(await tb.do(opcode=Opcode.READ, lba=lba, nlb=nlb, buf=buf), Status.SUCCESS)
    got, want = tb.read_bytes(buf, nlb * page), model.read(lba, nlb).data
    for i in range(nlb):
        assert got[i * page:(i + 1) * page] == want[i * page:(i + 1) * page], f"lba {lba + i}"
