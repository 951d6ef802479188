"""Python side of the NAND behavioural model (``sim/nand_model``).

The model itself runs inside Verilator (SystemVerilog pin sampler + C++ core
through DPI-C); this module is everything Python needs around it:

* :class:`NandConfig` -- the model's configuration (geometry from a
  :data:`~atomflash.spec.NAND_PROFILES` profile, array and interface timing,
  media rules, fault plan, power cuts, image path, seed) and its text file
  (``key = value`` lines the C++ core parses);
* :data:`CONFIG_KEYS` -- the one table of configuration keys, their types,
  defaults and meaning.  The C++ parser and config struct are *generated* from
  it (:func:`generate_header`), so a key exists once;
* :class:`Image` -- read-only access to the persistent image file (page data
  and spare, per-page program state, per-block erase counts and bad marks).
  Recovery oracles read every page's OOB through it;
* :func:`read_stats` -- the statistics JSON the model writes;
* :class:`NandCtl` / :class:`NandStat` -- the runtime control port's
  operations and statistic numbers (cocotb writes them into the model's
  ``ctl_*`` registers).

The image layout (all little-endian)::

    0                    IMAGE_HEADER (padded to 4 KiB)
    block_table_off      IMAGE_BLOCK x (luns * blocks_per_lun)
    page_table_off       IMAGE_PAGE  x (luns * blocks_per_lun * pages_per_block)
    data_off             page_bytes  x (same count), page after page

Pages and blocks are numbered LUN-major: ``block_index = lun * blocks_per_lun
+ block`` and ``page_index = block_index * pages_per_block + page``.  A page
whose ``programmed`` flag is clear reads as all FFh whatever its data bytes
hold (the file stays sparse; erase only clears flags).
"""

from __future__ import annotations

import io
import json
import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import gen_c, spec
from .specdsl import Bits, DocEnum, Record, u8, u16, u32, u64

# -----------------------------------------------------------------------------
# Image format
# -----------------------------------------------------------------------------

IMAGE_MAGIC = int.from_bytes(b"AFNANDIM", "little")
IMAGE_VERSION = 1
IMAGE_ALIGN = 4096

IMAGE_HEADER = Record(
    "nandimg_header",
    "NAND model image header (offset 0; the header area is padded to IMAGE_ALIGN).",
    [
        u64("magic", "IMAGE_MAGIC ('AFNANDIM')"),
        u32("version", "IMAGE_VERSION"),
        u32("header_bytes", "bytes reserved for the header (IMAGE_ALIGN)"),
        u32("page_data", "data bytes per page"),
        u32("page_spare", "spare bytes per page"),
        u32("pages_per_block", "pages per erase block"),
        u32("blocks_per_lun", "erase blocks per LUN"),
        u32("luns", "LUNs in the target"),
        u32("bits_per_cell", "1 (SLC) or 2 (MLC paired-page mode)"),
        u64("block_table_off", "file offset of the IMAGE_BLOCK table"),
        u64("page_table_off", "file offset of the IMAGE_PAGE table"),
        u64("data_off", "file offset of page 0's data"),
        u64("seed", "seed the image was created with (factory bad blocks)"),
        u64("power_ons", "times a model opened the image (power cycles + 1)"),
        u64("power_cuts", "power cuts the model recorded on this image"),
        u64("program_seq", "programs ever started on this image (IMAGE_PAGE.seq source)"),
        u64("rsvd0", "reserved, 0"),
        u64("rsvd1", "reserved, 0"),
    ],
    size=112,
)

IMAGE_BLOCK = Record(
    "nandimg_block",
    "Per-erase-block state in the image.",
    [
        u32("erase_count", "erases started on this block (completed or interrupted)"),
        u8("flags", "block flags", [
            Bits("factory_bad", 0, 1, "marked bad at manufacture (ONFI marker in page 0's first spare byte)"),
            Bits("erase_interrupted", 1, 1, "the last erase was cut by power loss: neither erased nor intact"),
            Bits("erase_failed", 2, 1, "the last erase reported FAIL (injected or worn out)"),
        ]),
        u8("rsvd", "reserved, 0"),
        u16("next_page", "1 + highest page programmed since the last erase (0: none); page-order rule"),
    ],
    size=8,
)

IMAGE_PAGE = Record(
    "nandimg_page",
    "Per-page state in the image.",
    [
        u8("flags", "page flags", [
            Bits("programmed", 0, 1, "programmed since the last erase; clear = reads all FFh"),
            Bits("torn", 1, 1, "a power cut interrupted this page's program: partly programmed"),
            Bits("paired_damage", 2, 1, "MLC: a cut while programming the paired upper page disturbed this page"),
            Bits("program_failed", 3, 1, "the last program reported FAIL; contents undefined"),
            Bits("in_progress", 4, 1, "a program was under way when the image was last written "
                                      "(process killed); becomes torn at the next open"),
            Bits("erase_disturbed", 5, 1, "an interrupted erase left this page partly erased"),
        ]),
        u8("programs", "program operations since the last erase (NOP count)"),
        u16("rsvd", "reserved, 0"),
        u32("seq", "low 32 bits of IMAGE_HEADER.program_seq when this page was last programmed (0: never)"),
    ],
    size=8,
)


def _align(n: int) -> int:
    return -(-n // IMAGE_ALIGN) * IMAGE_ALIGN


@dataclass(frozen=True)
class Geometry:
    page_data: int
    page_spare: int
    pages_per_block: int
    blocks_per_lun: int
    luns: int

    @property
    def page_bytes(self) -> int:
        return self.page_data + self.page_spare

    @property
    def blocks(self) -> int:
        return self.luns * self.blocks_per_lun

    @property
    def pages(self) -> int:
        return self.blocks * self.pages_per_block

    def layout(self) -> tuple[int, int, int, int]:
        """(block_table_off, page_table_off, data_off, file_size) of an image."""
        block_off = IMAGE_ALIGN
        page_off = _align(block_off + self.blocks * IMAGE_BLOCK.size)
        data_off = _align(page_off + self.pages * IMAGE_PAGE.size)
        return block_off, page_off, data_off, data_off + self.pages * self.page_bytes

    def row(self, lun: int, block: int, page: int) -> int:
        """ONFI row address: page in the low bits, then block, then LUN."""
        pb = max(1, (self.pages_per_block - 1).bit_length())
        bb = max(1, (self.blocks_per_lun - 1).bit_length())
        return page | (block << pb) | (lun << (pb + bb))


# -----------------------------------------------------------------------------
# Runtime control port and statistics
# -----------------------------------------------------------------------------


class NandCtl(DocEnum):
    """Operations of the model's control port (``ctl_op``; args ``ctl_arg0..2``)."""

    NOP = 0x00, "nothing; result 0"
    RELOAD = 0x01, "power cycle: close the image and reopen it with the (re-read) config file"
    POWER_CUT = 0x02, "cut power now (an operation in flight is torn at its current progress)"
    SCHEDULE_CUT = 0x03, "arg0 = NandCutWhen, arg1 = time ns or k (1-based), arg2 = progress in 1/1000 (0: default)"
    FAIL_PROGRAM = 0x04, "the program of page_index arg0 fails (FAIL status); arg0 = -1: the next program"
    FAIL_ERASE = 0x05, "the erase of block_index arg0 fails; arg0 = -1: the next erase"
    BIT_ERROR_RATE = 0x06, "raw bit error rate = arg0 / 1e12 per bit read (replaces the configured rate)"
    STAT = 0x07, "result = statistic NandStat arg0 (arg1 = LUN for per-LUN statistics)"
    DUMP_STATS = 0x08, "write the statistics JSON file now"
    CLEAR_STATS = 0x09, "zero every counter and log"
    TIMING_MODE = 0x0A, "select ONFI timing mode arg0 for the checks (as SET FEATURES would)"
    STRICT = 0x0B, "arg0 != 0: violations stop the simulation"


class NandCutWhen(DocEnum):
    AT_TIME = 0, "at simulated time arg1 (ns since the model opened)"
    PROGRAM = 1, "during the arg1-th program (counted from now)"
    ERASE = 2, "during the arg1-th erase (counted from now)"
    PROGRAM_KIND = 3, ("during the (arg1 & 0xFFFFFFFF)-th program (counted from now) of a page whose OOB record "
                       "kind (spec.Kind) is arg1 >> 32")


class NandStat(DocEnum):
    READS = 0x00, "array reads (READ 30h, COPYBACK READ 35h)"
    PROGRAMS = 0x01, "array programs started (PAGE PROGRAM and COPYBACK PROGRAM)"
    ERASES = 0x02, "block erases started"
    BYTES_IN = 0x03, "data bytes the host wrote into page registers"
    BYTES_OUT = 0x04, "bytes the host read (page data, status, ID, parameter page)"
    TIMING_VIOLATIONS = 0x05, "interface timing violations"
    PROTOCOL_ERRORS = 0x06, "unsupported or malformed command sequences"
    MEDIA_VIOLATIONS = 0x07, "NOP and page-order rule violations"
    BIT_ERRORS = 0x08, "raw bit errors injected into array reads"
    PROGRAM_FAILS = 0x09, "programs that ended with FAIL"
    ERASE_FAILS = 0x0A, "erases that ended with FAIL"
    POWER_CUTS = 0x0B, "1 once power is cut"
    BUSY_NS = 0x0C, "array busy time of LUN arg1 in ns"
    COMMANDS = 0x0D, "command cycles latched"
    NOW_NS = 0x0E, "model time in ns"
    PROGRAMS_KIND = 0x0F, "programs started of pages whose OOB record kind byte (spec.Kind) is arg1"


# Where the model finds a page's OOB record kind (power_cut_kind, the
# programs_by_kind statistics): spec.nand_page_layout puts the spare user bytes
# right after the page data -- NAND_BBM_BYTES bad-block marker bytes, then the
# OOB record -- and every codeword's BCH parity after them (parity_col), so no
# parity sits between the data and the record and the byte is at a fixed raw
# column: page_data + OOB_KIND_SPARE_OFFSET.  Generated into nand_model_gen.h.
OOB_KIND_SPARE_OFFSET = spec.NAND_BBM_BYTES + spec.OOB["kind"].offset


def oob_kind_column(page_data: int) -> int:
    """Raw page column of the OOB record's ``kind`` byte for pages of ``page_data`` data bytes."""
    return page_data + OOB_KIND_SPARE_OFFSET


# -----------------------------------------------------------------------------
# Configuration
# -----------------------------------------------------------------------------

# Model-only facts about each profile (the array shape and times live in
# spec.NAND_PROFILES).  ID bytes: the model is no real part, so it reports a
# manufacturer code of AFh (not a JEDEC assignment) and a device code per
# profile; controllers must read geometry from the parameter page.
PROFILE_EXTRAS = {
    "small": dict(id_bytes="af,5a,00,15,00", model="AFSIM-SMALL"),
    "realistic": dict(id_bytes="af,a8,00,26,00", model="AFSIM-MT29F8G08"),
}

# (key, type, default, doc).  type: int, float, str.  Lists are strings of
# comma-separated items, each item colon-separated numbers (lun:block:page).
CONFIG_KEYS: tuple[tuple[str, str, object, str], ...] = (
    ("profile", "str", "small", "NAND_PROFILES entry whose geometry/array times are the defaults"),
    ("page_data", "int", spec.NAND_PROFILES["small"].page_data, "data bytes per page"),
    ("page_spare", "int", spec.NAND_PROFILES["small"].page_spare, "spare bytes per page"),
    ("pages_per_block", "int", spec.NAND_PROFILES["small"].pages_per_block, "pages per block (power of two)"),
    ("blocks_per_lun", "int", spec.NAND_PROFILES["small"].blocks_per_lun, "erase blocks per LUN"),
    ("luns", "int", spec.NAND_PROFILES["small"].luns, "LUNs in the target"),
    ("t_r_ns", "int", spec.NAND_PROFILES["small"].t_r_ns, "array read time tR"),
    ("t_prog_ns", "int", spec.NAND_PROFILES["small"].t_prog_ns, "page program time tPROG"),
    ("t_bers_ns", "int", spec.NAND_PROFILES["small"].t_bers_ns, "block erase time tBERS"),
    ("t_rst_ns", "int", 5_000, "RESET busy time when idle (ONFI tRST, ready state)"),
    ("t_feat_ns", "int", 1_000, "SET/GET FEATURES busy time tFEAT (ONFI max 1 us)"),
    ("t_ccs_ns", "int", 200, "change column setup tCCS (CHANGE READ/WRITE COLUMN to data), reported in the parameter page"),
    ("clk_period_ps", "int", 10**12 // spec.NAND_CLK_HZ, "period of the model's sampling clock `clk`"),
    ("timing_mode", "int", 0, "ONFI asynchronous timing mode checked after power-on/RESET (0-5)"),
    ("timing_modes", "int", 0x3F, "bit mask of supported timing modes reported in the parameter page"),
    ("nvddr2_modes", "int", 0xFF, "bit mask of NV-DDR2 timing modes 0-7 reported in the parameter page (0: SDR only)"),
    ("t_dqsre_ps", "int", 10_000, "NV-DDR2 data output: RE# edge to DQS edge and its byte (tDQSRE, at most 25 ns)"),
    ("strict", "int", 0, "1: the first violation or protocol error stops the simulation"),
    ("nop", "int", 1, "partial programs allowed per page between erases"),
    ("sequential_pages", "int", 1, "1: pages of a block must be programmed in ascending order"),
    ("endurance", "int", 0, "erase cycles after which program/erase fail (0: unlimited)"),
    ("mlc_paired", "int", 0, "1: MLC paired pages (a cut in an upper page program damages its lower page)"),
    ("image", "str", "nand.img", "image file (created sparse on first use)"),
    ("seed", "int", 1, "seed of every random choice (bad blocks, bit errors, torn contents)"),
    ("bad_blocks", "str", "", "factory bad blocks at image creation: lun:block,..."),
    ("bad_block_rate", "float", 0.0, "extra factory bad blocks at image creation: probability per block"),
    ("bit_error_rate", "float", 0.0, "raw bit errors per bit on each array read"),
    ("bit_error_growth", "float", 0.0, "added to bit_error_rate per erase cycle of the block"),
    ("fail_program", "str", "", "programs that fail: lun:block:page,... (each once)"),
    ("fail_program_nth", "str", "", "the k-th programs (1-based, from power-on) fail: k,..."),
    ("fail_erase", "str", "", "erases that fail: lun:block,... (each once)"),
    ("fail_erase_nth", "str", "", "the k-th erases fail: k,..."),
    ("power_cut_ns", "int", -1, "cut power at this model time (ns since power-on; -1: never)"),
    ("power_cut_program", "int", 0, "cut power during the k-th program since power-on (0: never)"),
    ("power_cut_erase", "int", 0, "cut power during the k-th erase since power-on (0: never)"),
    ("power_cut_kind", "int", 0, "cut power during a program of a page whose OOB record kind byte is this "
                                 "spec.Kind value (0: never); which one: power_cut_kind_nth"),
    ("power_cut_kind_nth", "int", 1, "power_cut_kind cuts the k-th such program since power-on (1-based)"),
    ("power_cut_progress", "float", 0.5, "how far the interrupted program/erase got (0: start .. 1: end)"),
    ("power_cut_finish", "int", 0, "1: end the simulation ($finish) when power is cut"),
    ("id_bytes", "str", PROFILE_EXTRAS["small"]["id_bytes"], "READ ID 00h bytes (hex, comma-separated)"),
    ("manufacturer", "str", "ATOMFLASH", "parameter page manufacturer (12 chars)"),
    ("model", "str", PROFILE_EXTRAS["small"]["model"], "parameter page device model (20 chars)"),
    ("stats", "str", "", "statistics JSON written at DUMP_STATS, power cut and end (empty: <image>.stats.json)"),
    ("trace", "str", "", "one line per command to this file (empty: off)"),
    ("verbose", "int", 1, "1: print violations/errors as they happen"),
    ("log_limit", "int", 64, "violations/errors kept in the statistics logs"),
)

_KEY_TYPES = {k: t for k, t, _, _ in CONFIG_KEYS}
_DEFAULTS = {k: d for k, _, d, _ in CONFIG_KEYS}


def profile_defaults(name: str) -> dict[str, object]:
    """Config values a profile implies (geometry, array times, identity)."""
    p = spec.NAND_PROFILES[name]
    return dict(profile=name, page_data=p.page_data, page_spare=p.page_spare,
                pages_per_block=p.pages_per_block, blocks_per_lun=p.blocks_per_lun, luns=p.luns,
                t_r_ns=p.t_r_ns, t_prog_ns=p.t_prog_ns, t_bers_ns=p.t_bers_ns, **PROFILE_EXTRAS[name])


def _fmt_list(v) -> str:
    if isinstance(v, str):
        return v
    items = []
    for item in v:
        items.append(":".join(str(int(x)) for x in item) if isinstance(item, (tuple, list)) else str(int(item)))
    return ",".join(items)


class NandConfig(dict):
    """The model's configuration: a dict of CONFIG_KEYS values.

    ``NandConfig(profile="realistic", image="x.img", bad_blocks=[(0, 3)])``
    starts from the profile's values; lists may be given as Python sequences.
    """

    def __init__(self, profile: str = "small", **kw):
        super().__init__(_DEFAULTS)
        self.update(profile_defaults(profile))
        for k, v in kw.items():
            self[k] = v

    def __setitem__(self, key, value):
        if key not in _KEY_TYPES:
            raise KeyError(f"unknown NAND model config key {key!r}")
        super().__setitem__(key, value)

    def update(self, other=(), **kw):
        for k, v in dict(other, **kw).items():
            self[k] = v

    @property
    def geometry(self) -> Geometry:
        return Geometry(int(self["page_data"]), int(self["page_spare"]), int(self["pages_per_block"]),
                        int(self["blocks_per_lun"]), int(self["luns"]))

    def to_text(self) -> str:
        out = io.StringIO()
        out.write("# atomflash NAND model configuration (atomflash.nandsim.NandConfig)\n")
        for key, typ, _, doc in CONFIG_KEYS:  # `profile` first: later keys override it
            v = self[key]
            if typ == "int":
                v = int(v)
            elif typ == "float":
                v = repr(float(v))
            else:
                v = _fmt_list(v) if not isinstance(v, (str, os.PathLike)) else str(v)
                if "\n" in v or "#" in v:
                    raise ValueError(f"{key}: value may not contain newlines or '#'")
            out.write(f"{key} = {v}\n")
        return out.getvalue()

    def write(self, path: Path | str) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.to_text())
        tmp.replace(path)
        return path

    def stats_path(self) -> Path:
        return Path(self["stats"]) if self["stats"] else Path(str(self["image"]) + ".stats.json")


def write_config(path: Path | str, profile: str = "small", **kw) -> NandConfig:
    """Write a config file for ``+nand<i>_config=<path>``; returns the config."""
    cfg = NandConfig(profile, **kw)
    cfg.write(path)
    return cfg


def model_configs(run_dir: Path | str, *, profile: str, targets: int, clk_hz: int,
                  image_prefix: str | Path | None = None, overrides: dict | None = None,
                  per_target: list[dict] | None = None) -> list[NandConfig]:
    """One :class:`NandConfig` per target of a simulated SoC: the profile, the
    model clock = the SoC clock, image ``<image_prefix><i>.img`` (default
    ``run_dir/nand<i>.img``), seed ``1 + i``.  ``overrides``: config keys for
    every target (e.g. ``blocks_per_lun``); ``per_target[i]``: keys for target
    ``i`` only (e.g. its ``bad_blocks``)."""
    run_dir = Path(run_dir).resolve()  # the simulator runs in its gateware directory
    prefix = Path(image_prefix).resolve() if image_prefix is not None else run_dir / "nand"
    out = []
    for i in range(targets):
        kw = dict(image=f"{prefix}{i}.img", clk_period_ps=10**12 // int(clk_hz), seed=1 + i)
        kw.update(overrides or {})
        if per_target and i < len(per_target):
            kw.update(per_target[i])
        out.append(NandConfig(profile, **kw))
    return out


def write_configs(run_dir: Path | str, cfgs: list[NandConfig] | None = None, **kw) -> list[str]:
    """Write ``run_dir/nand<i>.cfg`` for every config (``cfgs``, or
    :func:`model_configs` ``(run_dir, **kw)``); returns the plusargs naming them."""
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    if cfgs is None:
        cfgs = model_configs(run_dir, **kw)
    args = []
    for i, cfg in enumerate(cfgs):
        path = cfg.write(run_dir / f"nand{i}.cfg")
        args.append(f"+nand{i}_config={path}")
    return args


def read_stats(path: Path | str) -> dict:
    """Statistics JSON written by the model (see docs/nand_model.md)."""
    return json.loads(Path(path).read_text())


def plusargs(index: int, config_path: Path | str, **overrides) -> list[str]:
    """Plusargs selecting instance ``index``'s config (and ``key=value`` overrides)."""
    args = [f"+nand{index}_config={config_path}"]
    if overrides:
        args.append(f"+nand{index}_set=" + ";".join(f"{k}={_fmt_list(v) if not isinstance(v, (int, float)) else v}"
                                                   for k, v in overrides.items()))
    return args


def paired_lower(page: int, pages_per_block: int) -> int | None:
    """MLC mode: the lower page sharing a word line with upper page ``page`` (None for a lower page):
    ``spec.mlc_paired_lower``, the rule the model (nand_model.cpp, through the generated
    ``af_mlc_paired_lower``) damages by and the core protects against."""
    lower = spec.mlc_paired_lower(page, pages_per_block)
    return None if lower < 0 else lower


# -----------------------------------------------------------------------------
# Image reader
# -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PageState:
    programmed: bool
    torn: bool
    paired_damage: bool
    program_failed: bool
    in_progress: bool
    erase_disturbed: bool
    programs: int
    seq: int

    @property
    def intact(self) -> bool:
        """Programmed and nothing happened to it that a controller would not expect."""
        return self.programmed and not (self.torn or self.paired_damage or self.program_failed
                                        or self.in_progress or self.erase_disturbed)


@dataclass(frozen=True)
class BlockState:
    erase_count: int
    factory_bad: bool
    erase_interrupted: bool
    erase_failed: bool
    next_page: int


class Image:
    """View of a NAND model image file (read-only unless ``writable``).

    ``Image(path)`` maps the file; use as a context manager or call
    :meth:`close`.  Addresses are (lun, block, page).  Page content is the raw
    array content (what a read returns before injected read bit errors): an
    unprogrammed page is all FFh.  Reading while a simulation runs sees the
    model's latest writes (the model maps the file shared).

    Offline writing (no simulation running on the file): :meth:`create` makes
    a fresh image exactly as the model does on first power-on (header,
    factory bad blocks of ``bad_blocks``), :meth:`program` programs a page as
    a successful PAGE PROGRAM would.  Tests use them to hand the firmware a
    pre-written flash.
    """

    def __init__(self, path: Path | str, writable: bool = False):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDWR if writable else os.O_RDONLY)
        size = os.fstat(self._fd).st_size
        if size < IMAGE_ALIGN:
            os.close(self._fd)
            raise ValueError(f"{path}: {size} bytes is too small for a NAND image")
        self.writable = writable
        self._map = mmap.mmap(self._fd, size, prot=mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0))
        self.header = IMAGE_HEADER.unpack(self._map[:IMAGE_HEADER.size])
        if self.header.magic != IMAGE_MAGIC:
            self.close()
            raise ValueError(f"{path}: not a NAND model image (magic {self.header.magic:#x})")
        if self.header.version != IMAGE_VERSION:
            self.close()
            raise ValueError(f"{path}: image version {self.header.version}, expected {IMAGE_VERSION}")
        h = self.header
        self.geometry = Geometry(h.page_data, h.page_spare, h.pages_per_block, h.blocks_per_lun, h.luns)
        if self.geometry.layout()[3] > size:
            self.close()
            raise ValueError(f"{path}: file shorter than its geometry needs")

    @classmethod
    def create(cls, path: Path | str, cfg: "NandConfig") -> "Image":
        """A fresh image for ``cfg`` (as ``nand_model.cpp`` creates one at first
        power-on), opened writable.  Factory bad blocks come from
        ``cfg["bad_blocks"]``; ``bad_block_rate`` (the model's own random
        draw) is not supported here."""
        if float(cfg["bad_block_rate"]) > 0:
            raise ValueError("Image.create: bad_block_rate is drawn by the model; list bad_blocks instead")
        g = cfg.geometry
        boff, poff, doff, size = g.layout()
        path = Path(path)
        with open(path, "wb") as f:
            f.truncate(size)
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), size) as m:
            m[:IMAGE_HEADER.size] = IMAGE_HEADER.pack(
                magic=0, version=IMAGE_VERSION, header_bytes=IMAGE_ALIGN, page_data=g.page_data,
                page_spare=g.page_spare, pages_per_block=g.pages_per_block, blocks_per_lun=g.blocks_per_lun,
                luns=g.luns, bits_per_cell=2 if int(cfg["mlc_paired"]) else 1, block_table_off=boff,
                page_table_off=poff, data_off=doff, seed=int(cfg["seed"]))
            for item in _fmt_list(cfg["bad_blocks"]).split(","):
                if not item.strip():
                    continue
                lun, block = (int(x, 0) for x in item.split(":"))
                if not (lun < g.luns and block < g.blocks_per_lun):
                    continue
                b = lun * g.blocks_per_lun + block
                m[boff + b * IMAGE_BLOCK.size:boff + (b + 1) * IMAGE_BLOCK.size] = IMAGE_BLOCK.pack(
                    flags=IMAGE_BLOCK.compose("flags", factory_bad=1))
                pidx = b * g.pages_per_block  # ONFI marker: page 0's first spare byte not FFh
                d = doff + pidx * g.page_bytes
                m[d:d + g.page_bytes] = b"\xff" * g.page_data + b"\x00" + b"\xff" * (g.page_spare - 1)
                m[poff + pidx * IMAGE_PAGE.size:poff + (pidx + 1) * IMAGE_PAGE.size] = IMAGE_PAGE.pack(
                    flags=IMAGE_PAGE.compose("flags", programmed=1))
            m[:8] = IMAGE_MAGIC.to_bytes(8, "little")  # last, as the model does
        return cls(path, writable=True)

    def program(self, lun: int, block: int, page: int, content: bytes) -> None:
        """Program a page offline: ``content`` (at most a page, data then spare;
        the rest stays FFh) as a successful PAGE PROGRAM leaves it."""
        if not self.writable:
            raise ValueError("Image.program needs Image(path, writable=True)")
        g = self.geometry
        if len(content) > g.page_bytes:
            raise ValueError(f"{len(content)} bytes do not fit a {g.page_bytes}-byte page")
        h = IMAGE_HEADER.unpack(self._map[:IMAGE_HEADER.size])
        pidx = self._page_index(lun, block, page)
        off = h.data_off + pidx * g.page_bytes
        self._map[off:off + g.page_bytes] = bytes(content) + b"\xff" * (g.page_bytes - len(content))
        seq = h.program_seq + 1
        poff = h.page_table_off + pidx * IMAGE_PAGE.size
        old = IMAGE_PAGE.unpack(self._map[poff:poff + IMAGE_PAGE.size])
        self._map[poff:poff + IMAGE_PAGE.size] = IMAGE_PAGE.pack(dict(
            flags=IMAGE_PAGE.compose("flags", programmed=1), programs=min(old.programs + 1, 255), rsvd=0,
            seq=seq & 0xFFFF_FFFF))
        boff = h.block_table_off + self._block_index(lun, block) * IMAGE_BLOCK.size
        blk = IMAGE_BLOCK.unpack(self._map[boff:boff + IMAGE_BLOCK.size])
        self._map[boff:boff + IMAGE_BLOCK.size] = IMAGE_BLOCK.pack(dict(
            erase_count=blk.erase_count, flags=blk.flags, rsvd=0, next_page=max(blk.next_page, page + 1)))
        self._map[:IMAGE_HEADER.size] = IMAGE_HEADER.pack(dict(h, program_seq=seq))

    def close(self) -> None:
        if getattr(self, "_map", None) is not None:
            self._map.close()
            self._map = None
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- addressing -----------------------------------------------------------
    def _block_index(self, lun: int, block: int) -> int:
        g = self.geometry
        if not (0 <= lun < g.luns and 0 <= block < g.blocks_per_lun):
            raise IndexError(f"no block lun={lun} block={block}")
        return lun * g.blocks_per_lun + block

    def _page_index(self, lun: int, block: int, page: int) -> int:
        if not 0 <= page < self.geometry.pages_per_block:
            raise IndexError(f"no page {page}")
        return self._block_index(lun, block) * self.geometry.pages_per_block + page

    # -- state ----------------------------------------------------------------
    @property
    def power_ons(self) -> int:
        return IMAGE_HEADER.unpack(self._map[:IMAGE_HEADER.size]).power_ons

    @property
    def power_cuts(self) -> int:
        return IMAGE_HEADER.unpack(self._map[:IMAGE_HEADER.size]).power_cuts

    @property
    def programs(self) -> int:
        """Programs ever started on this image (torn ones included)."""
        return IMAGE_HEADER.unpack(self._map[:IMAGE_HEADER.size]).program_seq

    def block(self, lun: int, block: int) -> BlockState:
        off = self.header.block_table_off + self._block_index(lun, block) * IMAGE_BLOCK.size
        r = IMAGE_BLOCK.unpack(self._map[off:off + IMAGE_BLOCK.size])
        f = IMAGE_BLOCK.decompose("flags", r.flags)
        return BlockState(r.erase_count, bool(f.factory_bad), bool(f.erase_interrupted), bool(f.erase_failed),
                          r.next_page)

    def erase_count(self, lun: int, block: int) -> int:
        return self.block(lun, block).erase_count

    def is_bad(self, lun: int, block: int) -> bool:
        """Factory bad, judged like a controller does: page 0's first spare byte is not FFh."""
        return self.spare(lun, block, 0)[0] != 0xFF

    def bad_blocks(self) -> list[tuple[int, int]]:
        g = self.geometry
        return [(l, b) for l in range(g.luns) for b in range(g.blocks_per_lun) if self.is_bad(l, b)]

    def page_state(self, lun: int, block: int, page: int) -> PageState:
        off = self.header.page_table_off + self._page_index(lun, block, page) * IMAGE_PAGE.size
        r = IMAGE_PAGE.unpack(self._map[off:off + IMAGE_PAGE.size])
        f = IMAGE_PAGE.decompose("flags", r.flags)
        return PageState(bool(f.programmed), bool(f.torn), bool(f.paired_damage), bool(f.program_failed),
                         bool(f.in_progress), bool(f.erase_disturbed), r.programs, r.seq)

    # -- content --------------------------------------------------------------
    def read(self, lun: int, block: int, page: int, column: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes of the page from ``column`` (data then spare)."""
        g = self.geometry
        if length is None:
            length = g.page_bytes - column
        if column < 0 or length < 0 or column + length > g.page_bytes:
            raise IndexError(f"column {column} + {length} outside a {g.page_bytes}-byte page")
        if not self.page_state(lun, block, page).programmed:
            return b"\xff" * length
        off = self.header.data_off + self._page_index(lun, block, page) * g.page_bytes + column
        return bytes(self._map[off:off + length])

    def page(self, lun: int, block: int, page: int) -> bytes:
        """Whole page: data + spare."""
        return self.read(lun, block, page)

    def data(self, lun: int, block: int, page: int) -> bytes:
        return self.read(lun, block, page, 0, self.geometry.page_data)

    def spare(self, lun: int, block: int, page: int) -> bytes:
        return self.read(lun, block, page, self.geometry.page_data, self.geometry.page_spare)

    def oob(self, lun: int, block: int, page: int, column: int | None = None, size: int | None = None) -> bytes:
        """The OOB record bytes (spec.OOB) as stored: at ``column`` (default: the page
        layout's OOB record column, ``spec.nand_page_layout(...).oob_record_col``: right
        after the data and the NAND_BBM_BYTES bad-block marker bytes), ``size`` bytes
        (default OOB.size)."""
        column = self.geometry.page_data + spec.NAND_BBM_BYTES if column is None else column
        return self.read(lun, block, page, column, spec.OOB.size if size is None else size)

    def pages(self, programmed_only: bool = True) -> Iterator[tuple[int, int, int]]:
        """Every (lun, block, page), in image order; by default only programmed ones."""
        g = self.geometry
        pt = self.header.page_table_off
        for i in range(g.pages):
            if programmed_only and not (self._map[pt + i * IMAGE_PAGE.size] & 1):
                continue
            blk, page = divmod(i, g.pages_per_block)
            lun, block = divmod(blk, g.blocks_per_lun)
            yield lun, block, page


# -----------------------------------------------------------------------------
# C++ header for the model core: image records, control codes, config struct
# -----------------------------------------------------------------------------


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def generate_header() -> str:
    """The C++ header ``nand_model_gen.h`` (a build output; see sim/nand_model)."""
    out = io.StringIO()
    out.write("/* nand_model_gen.h -- GENERATED from host/atomflash/nandsim.py; do not edit. */\n")
    out.write("#ifndef NAND_MODEL_GEN_H\n#define NAND_MODEL_GEN_H\n\n")
    out.write("#include <stdint.h>\n#include <stdlib.h>\n#include <string>\n#include \"atomflash_spec.h\"\n")
    out.write(f"\n#define AF_NANDIMG_MAGIC 0x{IMAGE_MAGIC:x}ull\n#define AF_NANDIMG_VERSION {IMAGE_VERSION}u\n")
    out.write(f"#define AF_NANDIMG_ALIGN {IMAGE_ALIGN}u\n")
    out.write(f"#define AF_NANDMODEL_OOB_KIND_SPARE_OFF {OOB_KIND_SPARE_OFFSET}u  "
              "/* spare byte holding the OOB record's kind: NAND_BBM_BYTES + OOB.kind offset */\n")
    for enum in (NandCtl, NandCutWhen, NandStat):
        gen_c._enum(out, enum)
    for rec in (IMAGE_HEADER, IMAGE_BLOCK, IMAGE_PAGE):
        gen_c._record(out, rec)

    out.write("\n/* Model configuration: one member per nandsim.CONFIG_KEYS entry. */\nstruct NandConfig {\n")
    for key, typ, default, doc in CONFIG_KEYS:
        if typ == "int":
            out.write(f"    int64_t {key} = {int(default)};  /* {doc} */\n")
        elif typ == "float":
            out.write(f"    double {key} = {float(default)!r};  /* {doc} */\n")
        else:
            out.write(f"    std::string {key} = {_c_string(str(default))};  /* {doc} */\n")
    out.write("};\n")

    out.write("\n/* Apply profile `name`'s values; false if unknown. */\n")
    out.write("static inline bool nand_config_profile(NandConfig &c, const std::string &name) {\n")
    for name in spec.NAND_PROFILES:
        out.write(f"    if (name == {_c_string(name)}) {{\n")
        for k, v in profile_defaults(name).items():
            if _KEY_TYPES[k] == "int":
                out.write(f"        c.{k} = {int(v)};\n")
            else:
                out.write(f"        c.{k} = {_c_string(str(v))};\n")
        out.write("        return true;\n    }\n")
    out.write("    return false;\n}\n")

    out.write("\n/* Set one key from its text; false if the key is unknown or the value malformed. */\n")
    out.write("static inline bool nand_config_set(NandConfig &c, const std::string &key, const std::string &val) {\n")
    out.write("    char *end = nullptr;\n")
    for key, typ, _, _ in CONFIG_KEYS:
        out.write(f"    if (key == {_c_string(key)}) {{\n")
        if key == "profile":
            out.write("        if (!nand_config_profile(c, val)) return false;\n        c.profile = val;\n")
        elif typ == "int":
            out.write(f"        c.{key} = strtoll(val.c_str(), &end, 0);\n        return *end == 0 && !val.empty();\n")
            out.write("    }\n")
            continue
        elif typ == "float":
            out.write(f"        c.{key} = strtod(val.c_str(), &end);\n        return *end == 0 && !val.empty();\n")
            out.write("    }\n")
            continue
        else:
            out.write(f"        c.{key} = val;\n")
        out.write("        return true;\n    }\n")
    out.write("    return false;\n}\n")
    out.write("\n#endif /* NAND_MODEL_GEN_H */\n")
    return out.getvalue()


def write_header(directory: Path | str) -> Path:
    """Write ``nand_model_gen.h`` (and the spec header it includes) into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("atomflash_spec.h", gen_c.generate()), ("nand_model_gen.h", generate_header())):
        path = directory / name
        if not path.exists() or path.read_text() != text:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text)
            tmp.replace(path)
    return directory / "nand_model_gen.h"


__all__ = [
    "IMAGE_HEADER", "IMAGE_BLOCK", "IMAGE_PAGE", "IMAGE_MAGIC", "IMAGE_VERSION", "Geometry", "NandCtl",
    "NandCutWhen", "NandStat", "CONFIG_KEYS", "NandConfig", "write_config", "read_stats", "plusargs", "Image",
    "PageState", "BlockState", "paired_lower", "generate_header", "write_header", "profile_defaults",
    "OOB_KIND_SPARE_OFFSET", "oob_kind_column",
]
