#!/usr/bin/env python3
"""`make soak`: a liveness soak of the whole simulated drive under a real mixed workload.

An application keeps a small **bank ledger** on host queue 0 and a small
**key-value store** on host queue 1, with several commands in flight on
both, on a drive whose live data is held at a fixed share of its capacity
(IDENTIFY) by a **filler** region that is rewritten in the background:

* ledger (queue 0): transfers as multi-block ATOMIC_WRITEs; as
  transactions committed by TX_COMMIT, committed by their final write
  (TX_FINAL) or aborted, some reading their own writes back with TX_READ;
  audits (READ), FLUSH and HINT(CHECKPOINT) now and then;
* key-value store (queue 1): put = APPEND then REMAP to the key's slot;
  batch put = several APPENDs then one REMAP of them all; abandoned put =
  APPEND then RELEASE; delete = trim of the slot; get = READ;
* filler (both queues): plain writes of 1-4 blocks over its region.

Every command is mirrored in the semantic model (``atomflash.workload.Recorder``).
The run is cut into *epochs*; each ends in a power cut -- the host's (the
simulator killed with commands in flight), or a NAND cut armed, two fifths
to four fifths of the way into the epoch's commands, through the SoC's NAND model control
port (``simctl.NandControl``): the k-th program
of a target, a program of a COMMIT, REMAP, TRIM record, a checkpoint page
or a GC copy, an erase, an instant; a third of the boots that recover are
cut too (an instant, an erase or the first program of the boot).  After the
recovering boot every LBA the workload uses is read back and judged by the
model's oracle (``workload.verify``): every acknowledged operation present,
every group, transaction and remap all-or-nothing, nothing foreign.  The
next epoch starts from what was read.

The soak fails on: an oracle violation; a device answer the model does not
give (``Mismatch``); a checkpoint on flash (read from the images after each
cut) whose entry for a filler LBA is older than a version published before
its floor (``flashimg.stale_entries``); any NO_SPACE while the host's data is below the
capacity (the model's live LBAs; the soak never goes above 90 %); a
command with no completion (a hang); a boot that does not come up.  A
NO_SPACE ends its epoch: the tool records the refused command, the fill,
the GET_LOG page, the console's ``stats`` and ``gc`` and the console's
tail, cuts the power and goes on; a level whose drive refuses writes in
``--stuck-epochs`` epochs in a row stops there.

    python sim/soak.py [--levels 50,90] [--ops 10000] [--seed 1] [--report docs/soak.md]
    python sim/soak.py --quick --dir /tmp/s      # the short version (tb/soak)

Figures are in simulated time and device counters: commands, power cuts,
GC copies (GET_LOG ``gc_copies`` summed over the boots), flash programs
(the NAND images' program counters) and write amplification (programs /
host pages), NO_SPACE count.  Each level's epochs append to
``<dir>/<level>/epochs.jsonl``: a stopped soak resumes there (the epoch it
was in is not judged: its history went with the process).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "host")]

from atomflash import nandsim, simctl, spec  # noqa: E402
from atomflash.device import CsrMap, Device  # noqa: E402
from atomflash.errors import DeviceError  # noqa: E402
from atomflash.nandsim import NandCutWhen  # noqa: E402
from atomflash.spec import Hint, Kind, Opcode, Status  # noqa: E402
from atomflash.transport import TransportError  # noqa: E402
from atomflash.workload import Mismatch, OutOfSpace, Recorder, read_span, verify  # noqa: E402
from sim import flashimg  # noqa: E402

ACCOUNTS = 32                 # the ledger's accounts: LBAs 0 .. 31
KEYS = 48                     # the key-value store's keys, a slot of KEY_SLOT LBAs each, after the accounts
KEY_SLOT = 2                  # a value is 1 or 2 blocks
QD = 4                        # commands in flight per queue at most
EPOCH_COMMANDS = (400, 1600)  # an epoch's commands at most (its armed cut usually comes first)
ARM_AFTER = (2 / 5, 4 / 5)    # shares of the budget run before a NAND cut is armed: epochs long enough that the
                              # boot and the read-back of every LBA do not dominate the soak's time
NS_PER_COMMAND = 150_000      # simulated time a command takes, about: the instant cut's window
BOOT_CUT_SHARE = 1 / 3        # boots that are cut while they recover
BOOT_CUT_NS = (300_000, 10_000_000)
STATS_EVERY = 40              # commands between GET_LOG samples (GC copies, NO_SPACE reason)
PROGRESS_EVERY = 200          # commands between progress lines
CMD_TIMEOUT = 240.0           # the simulator's CPU seconds without a completion: a hang (it runs ~1,000x slow)
STUCK_EPOCHS = 3              # a level stops after this many epochs in a row ended in NO_SPACE
SITES = ("host", "program", "kind:commit", "kind:remap", "kind:gc", "kind:trim", "erase", "kind:checkpoint",
         "instant")
KINDS = {"commit": Kind.COMMIT, "remap": Kind.REMAP, "checkpoint": Kind.CHECKPOINT, "gc": Kind.GC_COPY,
         "trim": Kind.TRIM}
DEFAULTS = {"levels": "50,90", "ops": 10_000, "seed": 1}
QUICK = {"levels": "90", "ops": 100, "epoch": (70, 100), "sites": ("kind:commit", "host"), "blocks_per_lun": 4}
FIGURES_BEGIN = "<!-- soak figures: written by sim/soak.py, do not edit by hand -->"
FIGURES_END = "<!-- end of soak figures -->"


# -- the recorder: TX_READ and HINT on top of atomflash.workload's ------------------------------------

class SoakRecorder(Recorder):
    """:class:`atomflash.workload.Recorder` with TX_READ (a transaction reading its own writes, checked
    against the model's view) and HINT."""

    def footprint(self, verb: str, *args, **kw) -> dict:
        if verb == "tx_read":
            tid, lba, nlb = args
            return {"lbas": set(range(lba, lba + nlb)), "tids": {tid}, "tokens": set(), "need": {}}
        if verb == "hint":
            return {"lbas": set(), "tids": set(), "tokens": set(), "need": {}}
        return super().footprint(verb, *args, **kw)

    def _plan_tx_read(self, tid: int, lba: int, nlb: int):
        comp = self.model.tx_read(tid, lba, nlb)

        def then(p):
            if p.cmd.ok and p.cmd.data != comp.data:
                raise Mismatch(f"tx read {tid} lba {lba} x {nlb}{self._on(p.q)}: the device's view of the "
                               "transaction differs from the model's")
        return comp, lambda d: d.submit_read(lba, nlb, tid=tid), f"tx read {tid} lba {lba}", then

    def _plan_hint(self, hint: int):
        return (self.model.hint(int(hint)), lambda d: d.submit(Opcode.HINT, hint=int(hint), detail=f"hint {hint}"),
                f"hint {Hint(hint).name}", None)


class Req:
    """A program's next command."""

    def __init__(self, verb: str, *args, **kw):
        self.verb, self.args, self.kw = verb, args, kw


class Wait:
    """A program waits for one of its commands to settle."""

    def __init__(self, pending):
        self.pending = pending


# -- the application ------------------------------------------------------------------------------

@dataclass
class Layout:
    """Where the application keeps what: accounts, key slots, filler (LBAs)."""
    capacity: int
    target: float
    filler_start: int = ACCOUNTS + KEYS * KEY_SLOT
    filler: int = 0

    def __post_init__(self):
        want = round(self.target * self.capacity) - ACCOUNTS - KEYS * KEY_SLOT
        self.filler = max(0, min(want, self.capacity - self.filler_start))

    @property
    def end(self) -> int:
        return self.filler_start + self.filler

    def slot(self, key: int) -> int:
        return ACCOUNTS + key * KEY_SLOT


class App:
    """The ledger, the key-value store and the filler as programs (generators yielding :class:`Req` or
    :class:`Wait`; they return what they were)."""

    def __init__(self, rec: SoakRecorder, rnd: random.Random, layout: Layout, salt: int, tids: "TidSource"):
        self.rec, self.rnd, self.lay, self.salt, self.tids = rec, rnd, layout, salt, tids
        self.serial = 0
        self.lba_size = rec.dev.lba_size
        self.max_atomic = min(rec.dev.info.max_atomic_pages, 4)
        self.max_triples = min(rec.dev.info.max_remap_triples, 4)
        # each epoch's first operations of a program run every kind once, in a drawn order (then at
        # random): a short epoch still exercises them all.  Entries: (r, kind) as the draws below read them
        self.decks = {"ledger": [(0.10, 0.5), (0.50, 0.10), (0.50, 0.50), (0.50, 0.90), (0.90, 0.5)],
                      "kv": [(0.20, 0.5), (0.50, 0.5), (0.65, 0.5), (0.80, 0.5), (0.90, 0.5)]}
        for deck in self.decks.values():
            rnd.shuffle(deck)
        # the longest drawn first (the deck's end: appends in flight, then their remap), so an epoch cut
        # early has still seen one finish
        self.decks["kv"].sort(key=lambda entry: entry == (0.50, 0.5))

    def draw(self, program: str) -> tuple[float, float]:
        """The next operation's draws (which operation, and the transaction's ending)."""
        deck = self.decks[program]
        return deck.pop() if deck else (self.rnd.random(), self.rnd.random())

    def blk(self, lba: int) -> bytes:
        """A block no other write has (the oracle tells blocks apart by content)."""
        self.serial += 1
        head = (self.serial.to_bytes(8, "little") + lba.to_bytes(8, "little") + self.salt.to_bytes(8, "little"))
        return (head * (self.lba_size // len(head) + 1))[:self.lba_size]

    def _busy(self) -> set[int]:
        return set().union(*(p.lbas for p in self.rec.pending)) if self.rec.pending else set()

    def pick(self, candidates, k: int) -> list:
        """``k`` of ``candidates`` (LBAs, or keys given as their first LBA), idle ones first."""
        busy = self._busy()
        idle = [c for c in candidates if c not in busy]
        return self.rnd.sample(idle if len(idle) >= k else list(candidates), k)

    def ledger(self):
        rnd = self.rnd
        r, kind = self.draw("ledger")
        if r < 0.30:      # a transfer as one multi-block atomic write
            accts = self.pick(range(ACCOUNTS), rnd.randint(2, self.max_atomic))
            yield Req("atomic", [(a, self.blk(a)) for a in accts])
            return "ledger atomic"
        if r < 0.85:      # a transfer as a transaction
            tid = self.tids.next()
            accts = self.pick(range(ACCOUNTS), rnd.randint(2, 3))
            final = kind < 0.35
            reads = rnd.random() < 0.4
            for i, a in enumerate(accts):
                last = i == len(accts) - 1
                yield Req("tx_write", tid, a, self.blk(a), final=final and last)
                if reads and not (final and last):
                    yield Req("tx_read", tid, a, 1)   # its own write
            if final:
                return "ledger tx final"
            if kind < 0.85:
                yield Req("tx_commit", tid)
                return "ledger tx commit"
            yield Req("tx_abort", tid)
            return "ledger tx abort"
        if r < 0.95:      # an audit
            first = rnd.randrange(0, ACCOUNTS, 8)
            yield Req("read", first, 8)
            return "ledger audit"
        if r < 0.975:
            yield Req("flush")
            return "flush"
        yield Req("hint", int(Hint.CHECKPOINT))
        return "hint"

    def kv(self):
        rnd, lay = self.rnd, self.lay
        slots = [lay.slot(k) for k in range(KEYS)]
        r, _ = self.draw("kv")
        if r < 0.40:      # put: append, then remap to the key
            slot, nlb = self.pick(slots, 1)[0], rnd.randint(1, KEY_SLOT)
            p = yield Req("append", b"".join(self.blk(slot + i) for i in range(nlb)))
            yield Wait(p)
            if not p.cmd.ok:
                return "kv put refused"
            yield Req("remap", [(slot, p.cmd.result, nlb)])
            return "kv put"
        if r < 0.60:      # batch put: appends in flight together, then one remap of them all
            keys = self.pick(slots, rnd.randint(2, self.max_triples))
            sizes = [rnd.randint(1, KEY_SLOT) for _ in keys]
            ps = []
            for slot, nlb in zip(keys, sizes):
                ps.append((yield Req("append", b"".join(self.blk(slot + i) for i in range(nlb)))))
            for p in ps:
                yield Wait(p)
            triples = [(slot, p.cmd.result, nlb) for slot, nlb, p in zip(keys, sizes, ps) if p.cmd.ok]
            if not triples:
                return "kv batch put refused"
            yield Req("remap", triples)
            return "kv batch put"
        if r < 0.70:      # abandoned put: append, then release
            slot = self.pick(slots, 1)[0]
            p = yield Req("append", self.blk(slot))
            yield Wait(p)
            if not p.cmd.ok:
                return "kv put refused"
            yield Req("release", p.cmd.result)
            return "kv abandoned put"
        if r < 0.85:
            slot = self.pick(slots, 1)[0]
            yield Req("trim", slot, KEY_SLOT)
            return "kv delete"
        slot = self.pick(slots, 1)[0]
        yield Req("read", slot, KEY_SLOT)
        return "kv get"

    def filler(self):
        lay, rnd = self.lay, self.rnd
        if not lay.filler:
            return "filler idle"
        used: set[int] = set()
        for lba in self.pick(range(lay.filler_start, lay.end), rnd.randint(1, QD)):
            lbas = set(range(lba, min(lba + rnd.randint(1, 4), lay.end)))
            if used & lbas:
                continue
            used |= lbas
            yield Req("write", lba, b"".join(self.blk(x) for x in sorted(lbas)))
        return "filler write"

    def fill(self):
        """The first epoch: every account, every key and the filler written (plain writes, large ones)."""
        lay, chunk = self.lay, min(self.rec.dev.info.max_transfer, 16)
        for start, end in ((0, ACCOUNTS), (ACCOUNTS, lay.filler_start), (lay.filler_start, lay.end)):
            for lba in range(start, end, chunk):
                n = min(chunk, end - lba)
                yield Req("write", lba, b"".join(self.blk(lba + i) for i in range(n)))
        return "fill"


class TidSource:
    """Transaction ids that no earlier epoch used (a transaction a power cut left behind keeps its id)."""

    def __init__(self, first: int = 1):
        self.value = first

    def next(self) -> int:
        tid = self.value
        self.value = self.value % 0xFFFF_FFF0 + 1
        return tid


class Stop(Exception):
    """The epoch's command budget is used up (the host then cuts the power)."""


def drive(rec: SoakRecorder, slots: list[tuple[int, callable]], *, budget: int, on_command=None,
          on_program=None) -> None:
    """Run ``slots`` -- (queue, program factory) -- round-robin, each slot one program at a time and
    starting the next when it ends, every queue with up to :data:`QD` commands in flight, until
    ``budget`` commands were submitted; then drain.  A command waits while it conflicts with one in
    flight (:meth:`Recorder.conflicts`) and yields to an older waiting one that needs what it would
    take.  A factory that returns None is done (its slot starts nothing more).  ``on_command(n)`` after
    each submission; ``on_program(what)`` when a program ends."""
    progs: list = [None] * len(slots)
    want: dict[int, object] = {}
    since: dict[int, int] = {}
    rounds = 0
    issued = 0
    retired: set[int] = set()

    def advance(i: int, value) -> None:
        since.pop(i, None)
        try:
            want[i] = progs[i].send(value)
        except StopIteration as e:
            progs[i] = None
            if on_program:
                on_program(e.value)

    def yields_to_older(i: int, fp: dict) -> bool:
        mine = since.get(i, rounds)
        for o in range(len(slots)):
            w = want.get(o)
            if o == i or progs[o] is None or not isinstance(w, Req) or since.get(o, rounds) >= mine:
                continue
            ofp = rec.footprint(w.verb, *w.args, **w.kw)
            if (rec._near_limit(ofp["need"]) or ofp["lbas"] & fp["lbas"] or ofp["tids"] & fp["tids"]
                    or ofp["tokens"] & fp["tokens"]):
                return True
        return False

    while True:
        moved = False
        order = list(range(len(slots)))
        order = order[rounds % len(order):] + order[:rounds % len(order)]
        for i in order:
            q, make = slots[i]
            if progs[i] is None:
                if issued >= budget or i in retired:
                    continue
                progs[i] = make()
                if progs[i] is None:   # a one-shot slot whose program ran
                    retired.add(i)
                    continue
                moved = True
                advance(i, None)
                if progs[i] is None:
                    continue
            w = want[i]
            if isinstance(w, Wait):
                if w.pending.settled:
                    advance(i, w.pending)
                    moved = True
                continue
            if rec.in_flight(q) >= QD:
                continue
            if rec.conflicts(w.verb, *w.args, **w.kw):
                since.setdefault(i, rounds)
                continue
            if yields_to_older(i, rec.footprint(w.verb, *w.args, **w.kw)):
                continue
            p = rec.issue(q, w.verb, *w.args, **w.kw)
            issued += 1
            if on_command:
                on_command(issued)
            advance(i, p)
            moved = True
        rounds += 1
        if all(p is None for p in progs) and (issued >= budget or len(retired) == len(slots)):
            break
        if not moved and not rec.pending:
            raise RuntimeError("soak: every program waits and nothing is in flight")
        rec.poll(block=not moved)
    rec.drain()


# -- the drive ------------------------------------------------------------------------------------

def core_registers(dev, ftl_offset: int, apart_s: float = 5.0) -> dict:
    """What the core shows through the host link while the drive hangs (the firmware may answer
    nothing): every readable FTL register (at ``ftl_offset`` in the controller window: the build's
    ``AFCTRL_FTL_OFFSET``) and every queue pair's indices, read twice ``apart_s`` wall seconds apart --
    the NAND counters tell a drive that is busy (a GC that gains nothing) from one where nothing
    moves (a wait no one will end)."""
    names = [r for r in spec.FTL_REGS.registers if r.access in ("ro", "rw")]
    queue_regs = ("size", "sq_tail", "sq_head", "cq_tail", "cq_head")

    def read() -> dict:
        out = {r.name: dev.t.read(dev.layout.ctrl_base + ftl_offset + r.offset, 1)[0] for r in names}
        for q in range(min(dev.rd("queues"), spec.HOST_QUEUE_PAIRS)):
            out[f"q{q}"] = {n: dev.rd(n, q) for n in queue_regs}
        return out

    try:
        first = read()
        time.sleep(apart_s)
        second = read()
    except Exception as err:  # noqa: BLE001 -- a diagnosis of a broken drive may fail too
        return {"error": f"{type(err).__name__}: {err}"}
    return {"first": first, "changed": {k: [first[k], v] for k, v in second.items() if first.get(k) != v}}


def image_counts(run: Path) -> tuple[int, int]:
    """Flash programs ever started and blocks ever erased, over the run's NAND images."""
    programs = erases = 0
    for path in sorted(run.glob("nand*.img")):
        with nandsim.Image(path) as img:
            programs += img.programs
            g = img.geometry
            erases += sum(img.erase_count(lun, b) for lun in range(g.luns) for b in range(g.blocks_per_lun))
    return programs, erases


def power_lost(run: Path) -> bool:
    return "power lost at" in simctl.boot_text(run)


def console_tail(run: Path, n: int = 25) -> list[str]:
    lines = [ln for ln in simctl.boot_text(run).splitlines() if ln.strip()]
    return lines[-n:]


def console_lines(run: Path, *needles: str, n: int = 8) -> list[str]:
    """The last ``n`` console lines of this boot naming any of ``needles``, and how many there were."""
    hits = [ln for ln in simctl.boot_text(run).splitlines() if any(s in ln for s in needles)]
    return hits[-n:] + ([f"({len(hits)} such lines in this boot)"] if len(hits) > n else [])


def ask_console(run: Path, *lines: str) -> dict[str, str]:
    out = {}
    for line in lines:
        try:
            out[line] = simctl.console_command(line, run, timeout=60)
        except simctl.SimError as e:
            out[line] = f"no answer ({e})"
            break
    return out


LOG_KEYS = ("no_space", "free_blocks", "spare_blocks", "bad_blocks", "gc_victims", "gc_copies", "erases",
            "checkpoints", "ckpt_seq", "log_pages", "host_write_pages", "nand_programs", "uptime_cycles")


def log_subset(log: dict) -> dict:
    out = {k: log[k] for k in LOG_KEYS if k in log}
    if "no_space" in out:
        out["no_space"] = spec.NoSpace(out["no_space"]).name
    return out


@dataclass
class Epoch:
    """One epoch's plan and what became of it."""
    n: int
    site: str
    budget: int
    arm: dict = field(default_factory=dict)        # the NAND cut, armed after arm_after commands
    arm_after: int = 0                             # commands before the cut is armed (0: when the workload starts)
    host_cut_at: int = 0                           # site host: the command after which the host cuts
    boot_cut: dict = field(default_factory=dict)   # NAND keys for a cut in the boot that follows
    # what happened
    commands: int = 0
    acknowledged: int = 0
    programs: dict = field(default_factory=dict)   # app programs by kind
    cut: str = ""                                  # how the power went
    boot_cut_came: str = ""
    no_space: dict = field(default_factory=dict)
    hang: str = ""
    hang_console: dict = field(default_factory=dict)
    mismatch: str = ""
    mismatch_state: dict = field(default_factory=dict)
    error: str = ""
    in_flight_at_cut: int = 0
    overlapped: int = 0
    live_lbas: int = 0
    gc_copies: int = 0
    flash_programs: int = 0
    flash_erases: int = 0
    host_pages: int = 0
    sim_cycles: int = 0
    violations: list = field(default_factory=list)
    stale_checkpoints: list = field(default_factory=list)   # entries older than what they must name
    judged: bool = False
    wall_s: float = 0.0

    @classmethod
    def draw(cls, n: int, seed: int, level: str, sites=SITES, epoch=EPOCH_COMMANDS, first: bool = False) -> "Epoch":
        """Epoch ``n``'s plan (``first``: a kind cut at the first record of its kind, as --quick draws)."""
        rnd = random.Random(f"soak {seed} {level} {n}")
        site = "fill" if n == 0 else sites[(n - 1) % len(sites)]
        budget = rnd.randint(*epoch)
        e = cls(n, site, budget)
        progress = round(rnd.uniform(0.05, 0.95), 3)
        if site not in ("host", "fill") and not first:
            e.arm_after = rnd.randint(int(budget * ARM_AFTER[0]), int(budget * ARM_AFTER[1]))
        left = budget - e.arm_after
        if site in ("host", "fill"):
            e.host_cut_at = budget if site == "fill" else rnd.randint(budget // 4, budget)
        elif site == "program":
            # about 1.3 programs a command, over 4 targets: within the first half of what is left
            e.arm = {"when": "PROGRAM", "targets": [rnd.randrange(4)], "k": rnd.randint(1, max(left // 6, 1))}
        elif site == "erase":
            e.arm = {"when": "ERASE", "targets": [0, 1, 2, 3], "k": rnd.randint(1, 2)}
        elif site == "instant":
            e.arm = {"when": "AT_TIME", "targets": [0, 1, 2, 3], "ns": rnd.randint(1, left * NS_PER_COMMAND // 2)}
        elif site.startswith("kind:"):
            # every target counts its own; the first to reach its k-th cuts (a TX_COMMIT writes a COMMIT
            # record, a REMAP a REMAP record, a delete a TRIM record: a few per target in an epoch)
            k = 1 if first else {"commit": 3, "remap": 3, "trim": 2}.get(site[5:], 1)
            e.arm = {"when": "PROGRAM_KIND", "targets": [0, 1, 2, 3], "kind": int(KINDS[site[5:]]),
                     "k": rnd.randint(1, k)}
        if e.arm:
            e.arm["progress"] = progress
        if n and rnd.random() < BOOT_CUT_SHARE:
            what = rnd.choice(("instant", "erase", "program"))
            if what == "instant":
                e.boot_cut = {"power_cut_ns": rnd.randint(*BOOT_CUT_NS)}
            elif what == "erase":
                e.boot_cut = {"power_cut_erase": rnd.randint(1, 3), "power_cut_progress": progress}
            else:
                e.boot_cut = {"power_cut_program": 1, "power_cut_progress": progress}
        return e


class Level:
    """One fill level's soak: a fresh drive in ``<dir>/<name>``, epochs until ``ops`` commands."""

    def __init__(self, name: str, target: float, args, gateware: Path, log=print, on_record=None):
        self.name, self.target, self.args, self.gw, self.log = name, target, args, gateware, log
        self.on_record = on_record   # after every epoch's record (the report is rewritten)
        self.dir = args.dir / name
        self.run = self.dir / "run"
        self.ledger = self.dir / "epochs.jsonl"
        self.epochs: list[dict] = self.read_ledger()
        self.tids = TidSource()
        self.counts_now = (0, 0)

    def ftl_offset(self) -> int:
        """The FTL registers' offset in the controller window, from the build's csr.csv."""
        return CsrMap.read(self.gw.parent / "csr.csv").constants["afctrl_ftl_offset"]

    def read_ledger(self) -> list[dict]:
        epochs = []
        if self.ledger.exists():
            for line in self.ledger.read_text().splitlines():
                try:
                    epochs.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        return epochs

    # -- figures
    @property
    def commands(self) -> int:
        return sum(e["commands"] for e in self.epochs if e["site"] != "fill")

    def stuck(self) -> bool:
        tail = self.epochs[-STUCK_EPOCHS:]
        return len(tail) == STUCK_EPOCHS and all(e.get("no_space") for e in tail)

    # -- the simulation
    def _cfg(self, keys: dict) -> simctl.SimConfig:
        return simctl.SimConfig(blocks_per_lun=self.args.blocks_per_lun, nand_set={"power_cut_finish": 1, **keys})

    def boot(self, e: Epoch | None, fresh: bool = False) -> None:
        """Power on (a cut in the boot first, if the epoch draws one); up and recovered on return."""
        if e is not None and e.boot_cut:
            try:
                simctl.start(self.run, self._cfg(e.boot_cut), gateware=self.gw, boot_timeout=600)
                e.boot_cut_came = "after boot"     # the boot reached its prompt first: the power goes there
                simctl.stop(self.run, power_cut=True)
            except simctl.SimError:
                if not power_lost(self.run):
                    raise
                e.boot_cut_came = "during boot"
            simctl.wait_exit(self.run, timeout=120)
        simctl.start(self.run, self._cfg({}), fresh=fresh, gateware=self.gw, boot_timeout=600)

    def keep_images(self, n: int) -> None:
        """The NAND images as the cut after epoch ``n`` left them (before the recovering boot), in
        images/after-<n>; the two newest sets are kept."""
        keep = self.dir / "images"
        dst = keep / f"after-{n}"
        dst.mkdir(parents=True, exist_ok=True)
        for path in self.run.glob("nand*.img"):
            shutil.copyfile(path, dst / path.name)
        for old in sorted(keep.glob("after-*"), key=lambda d: int(d.name.split("-")[1]))[:-2]:
            shutil.rmtree(old)

    def stale_checkpoints(self, lay: Layout) -> list[str]:
        """Every intact checkpoint on flash (after the cut) against the filler's pages below its floor: a
        checkpoint that names an older version than one published before it loses that LBA once GC erases
        the newer one's block (:func:`flashimg.stale_entries`)."""
        cfg = self._cfg({})
        profile = spec.NAND_PROFILES[cfg.profile]
        paths = sorted(self.run.glob("nand*.img"), key=lambda p: int(p.stem[len("nand"):]))
        images = [nandsim.Image(p) for p in paths]
        try:
            pages = flashimg.read_log(images, spec.nand_page_layout(profile), cfg.ways)
        finally:
            for img in images:
                img.close()
        filler = range(lay.filler_start, lay.end)
        stale = [str(x) for ck in flashimg.read_checkpoints(pages, profile.pages_per_block, profile.page_data)
                 for x in flashimg.stale_entries(pages, ck, filler)]
        return stale[:20] + ([f"... {len(stale) - 20} more"] if len(stale) > 20 else [])

    def attach(self):
        return Device.attach_sim_all(self.run, timeout=CMD_TIMEOUT)

    def judge(self, prev: dict | None, rec: SoakRecorder | None, devs, lay: Layout) -> dict[int, bytes]:
        """Read every LBA the application uses; the oracle's verdict on the epoch before (``prev``, its
        ``rec``).  Returns the contents (the next epoch's initial state)."""
        recovered = read_span(devs[0], lay.end)
        if prev is not None and rec is not None:
            v = verify(rec.model.history, recovered, lba_size=devs[0].lba_size, initial=rec.model.initial)
            prev["violations"] = [str(x) for x in v[:20]] + ([f"... {len(v) - 20} more"] if len(v) > 20 else [])
            prev["judged"] = True
        return {lba: b for lba, b in recovered.items() if any(b)}

    def record(self, e: dict) -> None:
        self.epochs.append(e)
        with open(self.ledger, "a") as fh:
            fh.write(json.dumps(e) + "\n")
        if self.on_record is not None:
            self.on_record()

    # -- one level
    def soak(self) -> None:
        args = self.args
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.stuck():
            self.log(f"soak {self.name}%: the drive refused writes in its last {STUCK_EPOCHS} epochs: stopped")
            return
        if self.commands >= args.ops and self.epochs:
            self.log(f"soak {self.name}%: done before ({self.commands} commands)")
            return
        resumed = bool(self.epochs) and (self.run / "nand0.img").exists()
        if self.epochs and not resumed:
            raise SystemExit(f"soak: {self.ledger} has epochs but {self.run} has no images: remove {self.dir}")
        n = len(self.epochs)
        e = Epoch.draw(n, args.seed, self.name, args.sites, args.epoch, args.quick)
        if resumed:
            self.counts_now = image_counts(self.run)
        self.boot(None, fresh=not resumed)
        devs = self.attach()
        info = devs[0].info
        lay = Layout(info.capacity, self.target)
        (self.dir / "identify.json").write_text(json.dumps({"capacity": info.capacity, "lba_size": info.lba_size,
                                                             "clk_hz": simctl.status(self.run)["clk_hz"]}))
        initial = self.judge(None, None, devs, lay) if resumed else {}
        if resumed:
            self.log(f"soak {self.name}%: resuming at epoch {n} (the epoch the last run was in is not judged)")
            self.record({"n": -1, "site": "resumed", "commands": 0, "judged": False, "violations": [],
                         "note": "a run stopped here: its epoch's history is gone, its contents taken as found"})
            e = Epoch.draw(len(self.epochs), args.seed, self.name, args.sites, args.epoch, args.quick)
        self.log(f"soak {self.name}%: capacity {lay.capacity} LBAs of {info.lba_size} B; the application uses "
                 f"0..{lay.end - 1} ({ACCOUNTS} accounts, {KEYS} keys x {KEY_SLOT}, filler {lay.filler}): "
                 f"{lay.end / lay.capacity:.0%} of the capacity")
        while True:
            t0 = time.monotonic()
            rec = SoakRecorder(devs, initial=initial)
            stats = self._epoch(e, rec, devs, lay)
            devs.close()
            simctl.stop(self.run, power_cut=True)   # the host's cut (a NAND cut already ended the simulation)
            simctl.wait_exit(self.run, timeout=120)
            if e.cut == "lost":
                e.cut = "nand" if power_lost(self.run) else "link lost"
                if e.cut != "nand":
                    e.error = "the host lost the device without a power cut"
            e.gc_copies = stats.get("gc_copies", 0)
            e.sim_cycles = stats.get("uptime_cycles", 0)
            before, self.counts_now = self.counts_now, image_counts(self.run)
            e.flash_programs = self.counts_now[0] - before[0]
            e.flash_erases = self.counts_now[1] - before[1]
            e.host_pages = rec.counts.pages
            e.in_flight_at_cut = len(rec.pending)
            e.overlapped = rec.counts.overlapped
            e.live_lbas = len(rec.model.map)
            e.acknowledged = rec.counts.issued - len(rec.pending)
            e.stale_checkpoints = self.stale_checkpoints(lay)
            done = asdict(e)
            done["build"] = self.gw.parent.name
            nxt = Epoch.draw(e.n + 1, args.seed, self.name, args.sites, args.epoch, args.quick)
            if args.keep_images:
                self.keep_images(e.n)
            try:
                self.boot(nxt)
                devs = self.attach()
                initial = self.judge(done, rec, devs, lay)
            except (simctl.SimError, TransportError, TimeoutError, DeviceError) as err:
                # a boot that does not come up, or a read-back the drive answers with an error (an LBA
                # bound to a page that cannot be read): the epoch fails with what the drive said
                done["error"] = f"the recovering boot or its read-back: {type(err).__name__}: {str(err)[-600:]}"
                done["console_tail"] = console_tail(self.run)
                done["wall_s"] = round(time.monotonic() - t0, 1)
                self.record(done)
                self.log(self.line(done))
                simctl.stop(self.run, power_cut=True)
                return
            done["wall_s"] = round(time.monotonic() - t0, 1)
            self.record(done)
            self.log(self.line(done))
            e = nxt
            if self.commands >= args.ops or self.stuck():
                break
        # the last epoch's judgement done: the drive takes new work?
        probe = bytes([0xA5]) * devs[0].lba_size
        try:
            devs[0].write(lay.end - 1, probe)
            ok = devs[0].read(lay.end - 1) == probe
            self.log(f"soak {self.name}%: new work after the last cut: {'accepted' if ok else 'WRONG DATA'}")
        except Exception as err:  # noqa: BLE001 -- reported, not raised
            self.log(f"soak {self.name}%: new work after the last cut: {type(err).__name__}: {err}")
        devs.close()
        simctl.stop(self.run)

    def _epoch(self, e: Epoch, rec: SoakRecorder, devs, lay: Layout) -> dict:
        """The workload until the epoch's cut; returns the last GET_LOG page of this boot (subset)."""
        rnd = random.Random(f"soak workload {self.args.seed} {self.name} {e.n}")
        app = App(rec, rnd, lay, salt=(self.args.seed << 16) ^ (e.n << 4) ^ int(self.name), tids=self.tids)
        self.tids.value = 1 + 10_000 * e.n    # no epoch reuses a tid of an earlier one
        last = {}

        def sample():
            nonlocal last
            try:
                last = log_subset(devs[0].stats())
            except (TransportError, OSError):
                pass

        ctl = None    # the NAND models' control port, once the epoch's cut is to be armed

        def arm():
            a = e.arm
            ctl.schedule_cut(a["targets"], NandCutWhen[a["when"]], a.get("k", 0), ns=a.get("ns", 0),
                             kind=a.get("kind", 0), progress=a.get("progress"), clk_hz=simctl.status(self.run)["clk_hz"])

        def on_command(n):
            e.commands = n
            if ctl is not None and e.arm_after and n == e.arm_after:
                arm()
            if n % STATS_EVERY == 0:
                sample()
            if n % PROGRESS_EVERY == 0:
                self.log(f"     {self.name}% epoch {e.n}: {n} commands")
            if e.host_cut_at and n >= e.host_cut_at and e.site != "fill":
                sample()
                raise Stop()

        def on_program(what):
            e.programs[what] = e.programs.get(what, 0) + 1

        if e.n == 0:
            once = iter([app.fill])
            slots = [(0, lambda: next(once, lambda: None)())]
            budget = 10**9
        else:
            slots = [(0, app.ledger), (0, app.ledger), (1, app.kv), (1, app.kv), (0, app.filler), (1, app.filler)]
            budget = e.budget
        try:
            if e.arm:
                ctl = simctl.NandControl.attach(devs[0].t, self.run)
                if not e.arm_after:
                    arm()
            drive(rec, slots, budget=budget, on_command=on_command, on_program=on_program)
            sample()
            e.cut = "host" if e.site in ("host", "fill") else "host (the armed cut did not come)"
        except Stop:
            e.cut = "host"
        except TransportError:
            e.cut = "lost"      # a NAND cut, once the simulation is seen to have ended by it
        except OutOfSpace as err:
            e.cut = "host (after NO_SPACE)"
            e.no_space = self._no_space(str(err), rec, devs, lay)
        except Mismatch as err:
            e.cut = "host (after a mismatch)"
            e.mismatch = str(err)
            e.mismatch_state = self._mismatch_state(rec, devs)
        except TimeoutError as err:
            e.cut = "host (after a hang)"
            e.hang = str(err)
            e.hang_console = {"console": ask_console(self.run, "stats", "gc"), "console_tail": console_tail(self.run),
                              "registers": core_registers(devs[0], self.ftl_offset())}
        except Exception as err:  # noqa: BLE001 -- recorded; the epoch ends with a cut
            e.cut = "host (after an error)"
            e.error = f"{type(err).__name__}: {err}\n{traceback.format_exc()[-1200:]}"
        return last

    def _mismatch_state(self, rec: SoakRecorder, devs) -> dict:
        """What the device and the model held when an answer differed: the transactions and appends the
        device lists open (GET_LOG OPEN), the device tokens the epoch's appends returned, the commands in
        flight, the console's tail."""
        out = {"tokens": [f"0x{t:016x}" for t in rec.tokens], "model_appends": len(rec.model.appends),
               "in_flight": [p.what for p in rec.pending if not p.settled][:16]}
        try:
            ol = devs[0].open_list()
            out["device_open_appends"] = [f"0x{tok:016x} x {n}" for tok, n in ol.appends]
            out["device_open_tx"] = [list(t) for t in ol.transactions]
        except Exception as err:  # noqa: BLE001 -- recorded
            out["device_open"] = f"no answer: {type(err).__name__}: {err}"
        out["console_tail"] = console_tail(self.run)
        return out

    def _no_space(self, what: str, rec: SoakRecorder, devs, lay: Layout) -> dict:
        """What a NO_SPACE episode looked like: the refused command, the fill, GET_LOG, the console."""
        refused = [p.what for p in rec.pending if p.cmd is not None and p.cmd.done and p.cmd.status == Status.NO_SPACE]
        out = {"command": what, "refused": len(refused), "refused_commands": refused[:8],
               "live_lbas": len(rec.model.map), "capacity": lay.capacity,
               "fill": round(len(rec.model.map) / lay.capacity, 3), "below_capacity": len(rec.model.map) < lay.capacity,
               "open_tx": len(rec.model.tx), "live_appends": len(rec.model.appends)}
        try:
            out["get_log"] = log_subset(devs[0].stats())
        except Exception as err:  # noqa: BLE001
            out["get_log"] = f"no answer: {type(err).__name__}: {err}"
        out["console"] = ask_console(self.run, "stats", "gc")
        out["console_gc_lines"] = console_lines(self.run, "gc:", "out of space", "no erased block")
        out["console_tail"] = console_tail(self.run)
        return out

    def line(self, d: dict) -> str:
        bad = failure(d)
        cut = d["cut"] + (f", boot cut {d['boot_cut_came']}" if d.get("boot_cut_came") else "")
        s = (f"{'FAIL' if bad else 'ok  '} {self.name}% epoch {d['n']:3d} {d['site']:16} {d['commands']:5d} commands, "
             f"live {d['live_lbas']} LBAs, gc copies {d['gc_copies']}, {cut}, {d['wall_s']:.0f} s")
        return s + (f"\n     {bad}" if bad else "")


def failure(d: dict) -> str:
    """Why an epoch failed the soak ('' when it passed)."""
    if d.get("violations"):
        return f"oracle: {len(d['violations'])} violations: " + "; ".join(d["violations"][:3])
    if d.get("stale_checkpoints"):
        return "stale checkpoint: " + "; ".join(d["stale_checkpoints"][:3])
    if d.get("mismatch"):
        return f"mismatch: {d['mismatch']}"
    if d.get("no_space"):
        ns = d["no_space"]
        if "command" in ns:
            log = ns.get("get_log", {})
            why = log.get("no_space", "?") if isinstance(log, dict) else "?"
            return (f"NO_SPACE ({why}) at {ns['fill']:.0%} of the capacity ({ns['live_lbas']} of {ns['capacity']} LBAs): "
                    f"{ns['command']}")
    if d.get("hang"):
        return f"hang: {d['hang'][:300]}"
    if d.get("error"):
        return f"error: {d['error'][:300]}"
    if d.get("site") not in ("resumed",) and not d.get("judged"):
        return "not judged"
    return ""


# -- the report --------------------------------------------------------------------------------------

def summarize(name: str, target: float, epochs: list[dict], ident: dict) -> dict:
    work = [e for e in epochs if e.get("site") not in ("fill", "resumed")]
    cut_sites: dict[str, list[int]] = {}
    for e in work:
        came = e["cut"] == "nand" or (e["site"] == "host" and e["cut"] == "host")
        cut_sites.setdefault(e["site"], [0, 0])
        cut_sites[e["site"]][0] += 1
        cut_sites[e["site"]][1] += came
    boot_cuts = sum(e.get("boot_cut_came") == "during boot" for e in epochs)
    programs: dict[str, int] = {}
    for e in work:
        for k, v in e.get("programs", {}).items():
            programs[k] = programs.get(k, 0) + v
    live = [e["live_lbas"] for e in work] or [0]
    episodes = [e for e in epochs if e.get("no_space", {}).get("command")]
    return {
        "level": name, "target": target, "epochs": len(work),
        "commands": sum(e["commands"] for e in work), "acknowledged": sum(e.get("acknowledged", 0) for e in work),
        "programs": programs, "operations": sum(programs.values()),
        "cuts": sum(1 for e in work) + sum(1 for e in epochs if e.get("site") == "fill") + boot_cuts,
        "cut_sites": cut_sites, "boot_cuts": boot_cuts, "fill_cuts": sum(1 for e in epochs if e.get("site") == "fill"),
        "gc_copies": sum(e.get("gc_copies", 0) for e in epochs),
        "flash_programs": sum(e.get("flash_programs", 0) for e in work),
        "flash_erases": sum(e.get("flash_erases", 0) for e in work),
        "host_pages": sum(e.get("host_pages", 0) for e in work),
        "sim_cycles": sum(e.get("sim_cycles", 0) for e in epochs),
        "live": (min(live), round(sum(live) / len(live)), max(live)),
        "no_space": len(episodes),
        "no_space_below": sum(1 for e in episodes if e["no_space"].get("below_capacity", True)),
        "violations": sum(len(e.get("violations", [])) for e in epochs),
        "failures": [(e["n"], failure(e)) for e in epochs if failure(e)],
        "first_no_space": episodes[0] if episodes else None,
        "in_flight_max": max((e.get("in_flight_at_cut", 0) for e in work), default=0),
        "overlapped": sum(e.get("overlapped", 0) for e in work),
        "capacity": ident.get("capacity"), "clk_hz": ident.get("clk_hz") or 1,
    }


def report_text(summaries: list[dict], args, capacity: int | None) -> str:
    rows = [("fill target", lambda s: f"{s['target']:.0%}"),
            ("host's live LBAs at the cuts (min / mean / max)", lambda s: " / ".join(map(str, s["live"]))),
            ("epochs (each ends in a power cut)", lambda s: f"{s['epochs']}"),
            ("device commands", lambda s: f"{s['commands']:,}"),
            ("  acknowledged (completed before the cut)", lambda s: f"{s['acknowledged']:,}"),
            ("  submitted while the other queue had one in flight", lambda s: f"{s['overlapped']:,}"),
            ("application operations", lambda s: f"{s['operations']:,}"),
            ("power cuts (epochs' + the fill's + in recovering boots)",
             lambda s: f"{s['cuts']} ({s['epochs']} + {s['fill_cuts']} + {s['boot_cuts']})"),
            ("GC copies (GET_LOG, summed over boots)", lambda s: f"{s['gc_copies']:,}"),
            ("flash programs / erases (NAND images)", lambda s: f"{s['flash_programs']:,} / {s['flash_erases']:,}"),
            ("host pages written", lambda s: f"{s['host_pages']:,}"),
            ("write amplification (programs / host pages)",
             lambda s: f"{s['flash_programs'] / s['host_pages']:.2f}" if s["host_pages"] else "-"),
            ("simulated time", lambda s: f"{s['sim_cycles'] / s['clk_hz']:.2f} s"),
            ("NO_SPACE episodes (below capacity)", lambda s: f"{s['no_space']} ({s['no_space_below']})"),
            ("oracle violations", lambda s: f"{s['violations']}"),
            ("verdict", lambda s: "FAILED" if s["failures"] else "passed" if s["commands"] >= args.ops
             else f"running: {s['commands']:,} of {args.ops:,} commands so far")]
    out = [FIGURES_BEGIN, "",
           f"`python sim/soak.py --levels {args.levels} --ops {args.ops} --seed {args.seed}` on "
           + ("the default simulated drive" if getattr(args, "blocks_per_lun", 8) == 8
              else f"a drive of {args.blocks_per_lun} blocks per LUN")
           + f" ({capacity or '?'} LBAs):", "",
           "| | " + " | ".join(f"{s['level']}%" for s in summaries) + " |",
           "| --- | " + " | ".join("---:" for _ in summaries) + " |"]
    for title, f in rows:
        out.append(f"| {title} | " + " | ".join(f(s) for s in summaries) + " |")
    for s in summaries:
        ops = ", ".join(f"{k} {v}" for k, v in sorted(s["programs"].items()))
        sites = ", ".join(f"{k} {v[1]} of {v[0]}" for k, v in sorted(s["cut_sites"].items()))
        out += ["", f"**{s['level']}%**: operations: {ops or 'none'}.  Cuts that came at their site, per site: "
                    f"{sites or 'none'} (one that did not come became the host's cut at the end of the epoch)."]
        if s["failures"]:
            out.append("")
            out.append(f"Failures ({len(s['failures'])}):")
            out.append("")
            for n, why in s["failures"][:12]:
                out.append(f"* epoch {n}: {why}")
        ns = s["first_no_space"]
        if ns:
            d = ns["no_space"]
            out += ["", f"The first NO_SPACE, epoch {ns['n']} after {ns['commands']} commands: `{d['command']}` "
                        f"with the host's data at {d['fill']:.1%} of the capacity ({d['live_lbas']} of "
                        f"{d['capacity']} LBAs), {d['open_tx']} transactions open and {d['live_appends']} appends "
                        f"live in the model; {d['refused']} commands answered NO_SPACE by then.", "",
                    "GET_LOG: `" + json.dumps(d.get("get_log")) + "`", "", "```"]
            for k, v in d.get("console", {}).items():
                out.append(f"> {k}")
                out += v.splitlines()
            out += ["```", "", "The console's GC and space lines of that boot:", "", "```",
                    *d.get("console_gc_lines", []), "```"]
    out += ["", FIGURES_END]
    return "\n".join(out)


def write_report(path: Path, text: str) -> None:
    old = path.read_text() if path.exists() else ""
    if FIGURES_BEGIN in old and FIGURES_END in old:
        head, rest = old.split(FIGURES_BEGIN, 1)
        tail = rest.split(FIGURES_END, 1)[1]
        new = head + text + tail
    else:
        new = (old.rstrip() + "\n\n" if old else "# Liveness soak (`make soak`, `sim/soak.py`)\n\n") + text + "\n"
    path.write_text(new)


def child_args(level: str, args, gw: Path) -> list[str]:
    """The command line of the child that soaks ``level`` for a ``--jobs`` run: every option of the
    parent's but the levels, the jobs, the report and --fresh (the parent's own), on the frozen ``gw``."""
    return ["--levels", level, "--ops", str(args.ops), "--seed", str(args.seed), "--dir", str(args.dir),
            "--gateware", str(gw), "--blocks-per-lun", str(args.blocks_per_lun),
            *(["--quick"] if args.quick else []), *(["--keep-images"] if args.keep_images else [])]


def soak_in_children(levels: list[str], args, gw: Path, figures) -> None:
    """``--jobs``: each level soaked by a child ``sim/soak.py --levels <one>`` on the same frozen
    simulation and ``--dir``, ``--jobs`` at a time; their lines go to our output prefixed by the level.
    The figures are read back from the levels' ledgers whenever a child prints, so the report stays
    current as with one process."""
    import subprocess
    import threading

    lock = threading.Lock()

    def run(lv: str) -> None:
        with subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *child_args(lv, args, gw)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
            for line in proc.stdout:
                with lock:
                    print(f"[{lv}%] {line}", end="", flush=True)
                    if args.report and line.lstrip().startswith(("ok", "FAIL", "NO_SPACE")):
                        write_report(args.report, figures()[1])

    pending = list(levels)
    while pending:
        batch, pending = pending[:args.jobs], pending[args.jobs:]
        threads = [threading.Thread(target=run, args=(lv,)) for lv in batch]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


# -- main ------------------------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--levels", default=DEFAULTS["levels"],
                   help="fill levels in percent of the capacity, comma-separated (a fresh drive each)")
    p.add_argument("--ops", type=int, default=DEFAULTS["ops"], help="device commands per level, at least")
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    p.add_argument("--dir", type=Path, default=ROOT / "build" / "soak", help="where the drives and results live")
    p.add_argument("--report", type=Path, default=None, help="write the figures into this markdown file")
    p.add_argument("--quick", action="store_true",
                   help=f"the short version: level {QUICK['levels']}%%, {QUICK['ops']} commands, "
                        f"epochs of {QUICK['epoch'][0]}-{QUICK['epoch'][1]} commands cut at "
                        f"{', '.join(QUICK['sites'])}, {QUICK['blocks_per_lun']} blocks per LUN")
    p.add_argument("--fresh", action="store_true", help="forget earlier epochs in --dir and start on fresh drives")
    p.add_argument("--blocks-per-lun", type=int, default=8,
                   help="the drive's blocks per LUN (8: the default drive, atomflash sim start's; --quick "
                        "uses 4: 320 LBAs, one block of over-provisioning, GC at work from the first epoch)")
    p.add_argument("--keep-images", action="store_true",
                   help="for debugging: copy the NAND images before each recovering boot to <dir>/<level>/images "
                        "(the two newest)")
    p.add_argument("--gateware", type=Path, default=None, help="a built simulation (default: build it now)")
    p.add_argument("--jobs", type=int, default=1,
                   help="levels soaked at once, each by a process of its own (one simulator each)")
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    args.sites, args.epoch = SITES, EPOCH_COMMANDS
    if args.quick:
        args.levels, args.ops, args.epoch, args.sites = QUICK["levels"], QUICK["ops"], QUICK["epoch"], QUICK["sites"]
        args.blocks_per_lun = QUICK["blocks_per_lun"]
    levels = [x.strip() for x in args.levels.split(",") if x.strip()]
    for lv in levels:
        if not lv.isdigit() or not 1 <= int(lv) <= 95:
            p.error(f"--levels {lv}: a percentage of the capacity, 1..95")
    args.dir = args.dir.resolve()
    if args.fresh:
        for lv in levels:
            shutil.rmtree(args.dir / lv, ignore_errors=True)
    args.dir.mkdir(parents=True, exist_ok=True)
    gw = args.gateware.resolve() if args.gateware else simctl.freeze_gateware(simctl.build(simctl.SimConfig()),
                                                                                args.dir / "gateware")
    print(f"soak: levels {', '.join(l + '%' for l in levels)}, {args.ops} commands each, seed {args.seed}, "
          f"in {args.dir} (simulation {gw.parent.name})", flush=True)
    levels_ = {lv: Level(lv, int(lv) / 100, args, gw, log=lambda s: print(s, flush=True)) for lv in levels}

    def figures() -> tuple[list[dict], str]:
        summaries = []
        for lv, level in levels_.items():
            if args.jobs > 1:   # the children's ledgers
                level.epochs = level.read_ledger()
            try:
                ident = json.loads((level.dir / "identify.json").read_text())
            except (OSError, json.JSONDecodeError):
                ident = {}
            summaries.append(summarize(lv, int(lv) / 100, level.epochs, ident))
        capacity = next((s["capacity"] for s in summaries if s["capacity"]), None)
        return summaries, report_text(summaries, args, capacity)

    def rewrite():   # a soak stopped at any point leaves current figures
        if args.report:
            write_report(args.report, figures()[1])

    if args.jobs > 1 and len(levels) > 1:
        soak_in_children(levels, args, gw, figures)
    else:
        for lv, level in levels_.items():
            level.on_record = rewrite
            try:
                level.soak()
            finally:
                simctl.stop(level.run, power_cut=True)
    summaries, text = figures()
    print(text)
    if args.report:
        write_report(args.report, text)
    bad = sum(len(s["failures"]) for s in summaries)
    short = [s["level"] for s in summaries if s["commands"] < args.ops and not s["failures"]]
    if short:
        print(f"soak: levels {', '.join(short)} ran fewer than {args.ops} commands")
    print(f"soak: {'FAILED' if bad or short else 'passed'}: {bad} failing epochs", flush=True)
    return 1 if bad or short else 0


if __name__ == "__main__":
    sys.exit(main())
