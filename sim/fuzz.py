"""Property-based fuzzing of the simulated drive's NVMe command interface, the reference model as oracle.

Hypothesis generates *programs*: short lists of abstract I/O commands (:class:`Cmd`) over two I/O
queues -- every opcode of ``NvmeIoOpcode`` and opcodes outside it, with valid values most of the time and
boundary or random values in one field or another (LBAs at and past the capacity, NLB 0, the largest and
too large, tids 0 / open / another queue's / random, tokens live / spent / another queue's / forged, lists
with duplicates, overlaps or too many entries, foreign namespaces, fused or SGL commands, reserved bits).
A :class:`Fuzzer` runs each command on the drive (``atomflash sim start --nvme``, one command at a time)
and the same command on the reference controller (:class:`atomflash.model.nvme.NvmeController`) and
requires

* the same NVMe status (SCT, SC) and, but for APPEND's token, the same DW0-DW1;
* the same data from every READ and TX_READ;
* a completion within :data:`DEADLINE_CYCLES` of *simulated* time (else a :class:`Hang`);
* after a program that leaves something open: the same open transactions and appends (the open-state
  log page), then, once its teardown has aborted what it left open and released what it appended on both
  sides, the same blocks at every LBA it touched (read back from the drive).

Each program starts the model from what the drive holds (:attr:`Fuzzer.known`, kept from the read-backs),
with nothing open on either side, so a program means the same whenever it runs and Hypothesis can shrink
a failing one to a short command list.  A drive token is never a model token (the drive's key is drawn
at boot): tokens are translated drive -> model in REMAP lists and RELEASE before the model sees them.

``python -m sim.fuzz`` is ``make fuzz``'s campaign: programs until ``--commands`` commands ran, then the
figure (commands, per opcode, statuses hit, divergences, hangs, simulated time) in ``--report``.
``tb/fuzz/test_fuzz.py`` is the cheap run of ``make test``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from hypothesis import HealthCheck, given, seed as hypothesis_seed, settings, strategies as st

from atomflash import simctl, spec
from atomflash.hostmem import HostMemory
from atomflash.model import Limits, Model
from atomflash.model.nvme import NvmeController
from atomflash.nvme import Completion, NvmeHost, _Pending
from atomflash.pcie_link import PcieLinkError
from atomflash.spec import NVME_SQE, Hint, NvmeIoOpcode as Io, Status

__all__ = ["Cmd", "Fuzzer", "Divergence", "Hang", "programs", "check_programs", "status_name", "SIM_CONFIG"]

SIM_CONFIG = simctl.SimConfig(nvme=True)     # the build tb/host/test_nvme_sim.py boots (nand_set is no build arg)
QUEUES = (1, 2)
CLOCK_HZ = int(spec.NAND_CLK_HZ)
DEADLINE_CYCLES = 20_000_000                 # 200 ms simulated: far beyond any one command, GC and checkpoints included
FIRST_LOOK_S = 2.0                           # wall seconds before a command's simulated time is first measured
DEAD_SIMULATOR_S = 3600.0                    # wall-clock last resort: the simulator itself stopped advancing
UNMAPPED_SAMPLE = 3                          # touched LBAs a program left as they were, read back after it
GAP = 3                                      # LBAs read back apart by at most this share one READ
ABORT_RESTARTS = 10                          # hangs a campaign survives by restarting the simulator


class Divergence(AssertionError):
    """The drive answered differently from the reference model."""


class Hang(AssertionError):
    """A command got no completion within the simulated-time deadline."""


# == the abstract commands ==================================================================================
@dataclass(frozen=True)
class TokenRef:
    """A token by what it is, resolved when the command runs: ``live`` (an append of this queue),
    ``other`` (an append of the other queue), ``spent`` (remapped or released), ``flip`` (a live one with
    bit ``arg`` flipped), ``raw`` (the value ``arg``)."""
    kind: str
    index: int = 0
    arg: int = 0

    def __repr__(self):
        return f"{self.kind}[{self.index}]" + (f"^{self.arg}" if self.kind == "flip" else "") \
            if self.kind != "raw" else f"raw({self.arg:#x})"


@dataclass(frozen=True)
class TidRef:
    """A transaction id resolved when the command runs: ``open`` (one this queue has open), ``other``
    (one the other queue has open), else ``raw`` (the value ``arg``)."""
    kind: str
    index: int = 0
    arg: int = 0

    def __repr__(self):
        return f"tid:{self.kind}[{self.index}]" if self.kind != "raw" else f"tid:{self.arg}"


@dataclass(frozen=True)
class Cmd:
    """One I/O command as generated; fields left at their defaults are not printed.  ``nlb`` is the SQE's
    0-based field; ``blocks`` overrides how many blocks of data the host supplies (default: what ``nlb``
    says, one block when that is more than the drive takes, which it then never fetches)."""
    op: int
    q: int = 1
    slba: int = 0
    nlb: int = 0
    fua: int = 0
    final: int = 0
    new: int = 0
    tid: object = 0
    hint: int = 0
    lbas: tuple = ()                  # ATOMIC_WRITE's list
    ranges: tuple = ()                # DSM: (slba, nlb, attributes)
    ad: int = 1
    triples: tuple = ()               # REMAP: (lba, TokenRef, nlb or None: the append's length)
    token: object = None              # RELEASE
    nsid: int = spec.NVME.NSID
    fuse: int = 0
    psdt: int = 0
    offset: int = 0                   # the data buffer's start inside its first page
    mptr_offset: int = 0
    reserved: int = 0                 # noise in CDW2-3, CDW12's reserved bits and dwords the opcode does not use

    def __repr__(self):
        try:
            name = Io(self.op).name
        except ValueError:
            name = f"op{self.op:#04x}"
        parts = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)[1:]
                 if getattr(self, f.name) != f.default]
        return f"{name}({', '.join(parts)})"


def _weighted(*choices):
    """One of ``(weight, strategy)``; shrinks toward the first."""
    total = sum(w for w, _ in choices)

    def pick(k):
        for w, s in choices:
            if k < w:
                return s
            k -= w
        raise AssertionError

    return st.integers(0, total - 1).flatmap(pick)


def programs(limits: Limits, *, min_commands: int = 4, max_commands: int = 24, window: int = 32):
    """Strategy: lists of :class:`Cmd` for a drive of ``limits``, LBAs mostly in ``[0, window)`` so
    commands meet each other's blocks: ``min_commands // 2`` to ``max_commands // 2`` items, an item a
    command or a short sequence, cut at ``max_commands``."""
    cap, L = limits.capacity, limits
    lba = _weighted((12, st.integers(0, window - 1)),
                    (2, st.sampled_from([cap - 1, cap, cap + 1, cap - L.max_transfer, 2**32, 2**63, 2**64 - 1])),
                    (1, st.integers(0, cap - 1)), (1, st.integers(0, 2**64 - 1)))
    nlb = _weighted((20, st.integers(0, 3)), (1, st.integers(0, L.max_transfer - 1)),
                    (2, st.sampled_from([L.max_transfer, 0xFFFF])), (1, st.just(L.max_transfer - 1)),
                    (1, st.integers(0, 0xFFFF)))
    small_nlb = _weighted((10, st.integers(0, 3)), (1, st.sampled_from([L.max_transfer, 0xFFFF])))
    q = st.sampled_from(QUEUES)
    tid = _weighted((6, st.builds(TidRef, st.just("open"), st.integers(0, 3))),
                    (4, st.builds(TidRef, st.just("raw"), st.just(0), st.integers(1, 4))),
                    (1, st.builds(TidRef, st.just("raw"), st.just(0), st.just(0))),
                    (1, st.builds(TidRef, st.just("other"), st.integers(0, 3))),
                    (1, st.builds(TidRef, st.just("raw"), st.just(0), st.integers(0, 2**32 - 1))))
    token = _weighted((8, st.builds(TokenRef, st.just("live"), st.integers(0, 3))),
                      (1, st.builds(TokenRef, st.just("spent"), st.integers(0, 3))),
                      (1, st.builds(TokenRef, st.just("other"), st.integers(0, 3))),
                      (1, st.builds(TokenRef, st.just("flip"), st.integers(0, 3), st.integers(0, 63))),
                      (1, st.builds(TokenRef, st.just("raw"), st.just(0), st.integers(0, 2**64 - 1))))
    # what most commands carry unbroken, and now and then broken
    nsid = _weighted((30, st.just(spec.NVME.NSID)), (1, st.sampled_from([0, 2, 0xFFFF_FFFF])),
                     (1, st.integers(0, 2**32 - 1)))
    rare_bits = _weighted((30, st.just(0)), (1, st.integers(1, 3)))
    offset = _weighted((12, st.just(0)), (2, st.sampled_from([4, 512, 2044, 4092])),
                       (1, st.sampled_from([1, 2, 3, 4094])))
    reserved = _weighted((20, st.just(0)), (1, st.integers(1, 2**32 - 1)))

    def common(op, **kw):
        kw = {"q": q, "nsid": nsid, "fuse": rare_bits, "psdt": rare_bits, "reserved": reserved, **kw}
        return st.builds(Cmd, op=st.just(int(op)), **kw)

    atomic_lbas = _weighted((8, st.lists(lba, min_size=1, max_size=4)),
                            (1, st.lists(st.integers(0, window - 1), min_size=2, max_size=4).map(
                                lambda xs: tuple(xs) + (xs[0],))),                      # a duplicate
                            (1, st.integers(L.max_atomic_pages, L.max_atomic_pages + 1).map(
                                lambda n: tuple(range(n)))),                           # the largest, too large
                            (1, st.just(())))                                          # NLB of -1: 0xFFFF
    dsm_ranges = _weighted((8, st.lists(st.tuples(lba, st.integers(0, 8), st.just(0)), min_size=1, max_size=3)),
                           (1, st.lists(st.tuples(lba, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
                                        min_size=1, max_size=256)))
    triple = st.tuples(lba, token, _weighted((8, st.none()), (1, st.integers(0, 3)), (1, st.integers(0, 2**32 - 1))))
    triples = _weighted((8, st.lists(triple, min_size=1, max_size=3)),
                        (1, st.integers(L.max_remap_triples, L.max_remap_triples + 1).map(
                            lambda n: tuple((i, TokenRef("live", i), None) for i in range(n)))),
                        (1, st.lists(st.tuples(st.integers(0, window - 1), st.just(TokenRef("live", 0)), st.none()),
                                     min_size=2, max_size=2)))               # one token twice, or overlapping LBAs
    known = set(int(o) for o in Io)
    command = _weighted(
        (6, common(Io.WRITE, slba=lba, nlb=nlb, fua=st.integers(0, 1), offset=offset)),
        (6, common(Io.READ, slba=lba, nlb=nlb, offset=offset)),
        (2, common(Io.FLUSH, nsid=_weighted((8, st.just(spec.NVME.NSID)), (2, st.just(0xFFFF_FFFF)),
                                            (1, st.integers(0, 2**32 - 1))))),
        (2, common(Io.WRITE_ZEROES, slba=lba, nlb=nlb, fua=st.integers(0, 1))),
        (2, common(Io.DATASET_MANAGEMENT, ranges=dsm_ranges.map(tuple),
                   ad=_weighted((8, st.just(1)), (1, st.just(0))))),
        (4, common(Io.ATOMIC_WRITE, lbas=atomic_lbas.map(tuple), offset=offset,
                   mptr_offset=_weighted((10, st.just(0)), (1, st.sampled_from([4, 8, 1, 2]))))),
        (6, common(Io.TX_WRITE, tid=tid, slba=lba, nlb=small_nlb, final=_weighted((4, st.just(0)), (1, st.just(1))),
                   new=_weighted((4, st.just(0)), (1, st.just(1))), offset=offset)),
        (3, common(Io.TX_READ, tid=tid, slba=lba, nlb=small_nlb)),
        (3, common(Io.TX_COMMIT, tid=tid)),
        (2, common(Io.TX_ABORT, tid=tid)),
        (5, common(Io.APPEND, nlb=small_nlb, offset=offset)),
        (4, common(Io.REMAP, triples=triples.map(tuple))),
        (2, common(Io.RELEASE, token=token)),
        (2, common(Io.HINT, hint=_weighted((6, st.sampled_from([int(h) for h in Hint])),
                                           (1, st.integers(0, 2**32 - 1))))),
        (2, common(Io.READ, slba=lba, nlb=nlb).flatmap(
            lambda c: st.integers(0, 255).filter(lambda o: o not in known).map(lambda o: replace(c, op=o)))),
    )
    # valid sequences the random mix rarely assembles: a transaction written then closed, appends remapped
    def transaction(args):
        qid, tid, writes, close, new = args
        cmds = [Cmd(int(Io.TX_WRITE), q=qid, tid=TidRef("raw", 0, tid), slba=a, nlb=n, new=new)
                for a, n in writes]
        if close == "commit":
            cmds.append(Cmd(int(Io.TX_COMMIT), q=qid, tid=TidRef("raw", 0, tid)))
        elif close == "abort":
            cmds.append(Cmd(int(Io.TX_ABORT), q=qid, tid=TidRef("raw", 0, tid)))
        elif close == "read":
            cmds.append(Cmd(int(Io.TX_READ), q=qid, tid=TidRef("raw", 0, tid), slba=writes[0][0], nlb=3))
        else:
            cmds[-1] = replace(cmds[-1], final=1)
        return cmds

    def remap(args):
        qid, lengths, lbas, close = args
        cmds = [Cmd(int(Io.APPEND), q=qid, nlb=n) for n in lengths]
        if close == "release":
            return cmds + [Cmd(int(Io.RELEASE), q=qid, token=TokenRef("live", 0))]
        wrong = close == "wrong length"         # REMAP_LENGTH: the first triple one block longer than its append
        triples = tuple((lba, TokenRef("live", i), lengths[0] + 2 if wrong and i == 0 else None)
                        for i, lba in enumerate(lbas[:len(lengths)]))
        return cmds + [Cmd(int(Io.REMAP), q=qid, triples=triples)]

    def pressure(args):
        """More than the drive holds: appends past max_pending, transactions past max_open_tx."""
        qid, kind = args
        if kind == "pending":
            n = L.max_pending // L.max_transfer + 1
            return [Cmd(int(Io.APPEND), q=qid, nlb=L.max_transfer - 1) for _ in range(n)]
        return [Cmd(int(Io.TX_WRITE), q=qid, tid=TidRef("raw", 0, 100 + i), slba=i % window)
                for i in range(L.max_open_tx + 1)]

    window_lba = st.integers(0, window - 1)
    scenario = _weighted(
        (3, st.tuples(q, st.integers(1, 4), st.lists(st.tuples(window_lba, st.integers(0, 3)), min_size=1, max_size=3),
                      st.sampled_from(["commit", "final", "abort", "read"]),
                      _weighted((4, st.just(0)), (1, st.just(1)))).map(transaction)),
        (2, st.tuples(q, st.lists(st.integers(0, 3), min_size=1, max_size=3),
                      st.lists(st.integers(0, window // 4 - 1).map(lambda k: 4 * k), min_size=3, max_size=3),
                      st.sampled_from(["remap", "remap", "release", "wrong length"])).map(remap)),
        (1, st.tuples(q, st.sampled_from(["pending", "open"])).map(pressure)))
    item = _weighted((6, command.map(lambda c: [c])), (1, scenario))
    return st.lists(item, min_size=max(1, min_commands // 2), max_size=max(1, max_commands // 2)).map(
        lambda items: [c for cmds in items for c in cmds][:max_commands])


# == one command made concrete ==============================================================================
@dataclass
class Raw:
    """An SQE's fields and the host data that goes with it."""
    opcode: int
    fields: dict
    data_out: bytes = b""
    data_in: int = 0
    metadata: bytes = b""
    fuse: int = 0
    psdt: int = 0
    offset: int = 0
    mptr_offset: int = 0


def submit(host: NvmeHost, qid: int, raw: Raw) -> int:
    """``NvmeHost.submit`` with what it does not let a caller set: FUSE and PSDT, an MPTR inside its page."""
    q, memory = host.queues[qid], host.memory
    cid = q.next_cid
    q.next_cid = (cid + 1) & 0xFFFF
    flds, allocations, landing = dict(raw.fields), [], None
    if raw.data_out or raw.data_in:
        nbytes = len(raw.data_out) or raw.data_in
        addr, taken = host._buffer(nbytes, raw.offset)
        allocations += taken
        if raw.data_out:
            memory.write(addr, raw.data_out)
        else:
            landing = (addr, raw.data_in)
        flds["prp1"], flds["prp2"] = host.prps(addr, nbytes, allocations)
    if raw.metadata:
        base = memory.alloc(raw.mptr_offset + len(raw.metadata))
        allocations.append((base, raw.mptr_offset + len(raw.metadata)))
        flds["mptr"] = base + raw.mptr_offset
        memory.write(flds["mptr"], raw.metadata)
    sqe = NVME_SQE.pack(cdw0=NVME_SQE.compose("cdw0", opc=raw.opcode, fuse=raw.fuse, psdt=raw.psdt, cid=cid), **flds)
    memory.write(q.sq + q.tail * NVME_SQE.size, sqe)
    q.waiting[cid] = _Pending(allocations, landing)
    q.tail = (q.tail + 1) % q.entries
    host.write_reg("sq_tail", q.tail, qid)
    return cid


def status_name(sct: int, sc: int) -> str:
    """``SCT/SC name``: atomflash's Status name where there is one."""
    s = spec.atomflash_status_of(sct, sc)
    if s is not None:
        return f"{sct}/{sc:#04x} {s.name}"
    try:
        name = {spec.NvmeSct.GENERIC: spec.NvmeGenericStatus,
                spec.NvmeSct.COMMAND_SPECIFIC: spec.NvmeCommandStatus}[sct](sc).name
    except (KeyError, ValueError):
        name = "?"
    return f"{sct}/{sc:#04x} {name}"


def op_name(op: int) -> str:
    try:
        return Io(op).name
    except ValueError:
        return "OTHER_OPCODE"


# == the fuzzer =============================================================================================
@dataclass
class Stats:
    commands: int = 0                                   # commands run on both sides and compared
    programs: int = 0
    readback_reads: int = 0
    open_state_checks: int = 0
    divergences: int = 0
    hangs: int = 0
    restarts: int = 0
    cycles: int = 0                                     # simulated cycles the drive ran for
    wall_s: float = 0.0
    per_opcode: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)  # (opcode name, status name)
    findings: list = field(default_factory=list)
    op_cycles: Counter = field(default_factory=Counter)   # simulated cycles per opcode, SQE fetch to CQE
    slowest: dict = field(default_factory=dict)           # the longest command per opcode, in cycles

    def as_json(self) -> dict:
        return {"commands": self.commands, "programs": self.programs, "readback_reads": self.readback_reads,
                "open_state_checks": self.open_state_checks, "divergences": self.divergences, "hangs": self.hangs,
                "restarts": self.restarts, "cycles": self.cycles, "wall_s": round(self.wall_s, 1),
                "per_opcode": dict(self.per_opcode),
                "statuses": [[o, s, n] for (o, s), n in sorted(self.statuses.items())],
                "findings": self.findings, "op_cycles": dict(self.op_cycles), "slowest": self.slowest}

    @classmethod
    def merged(cls, parts: list["Stats"]) -> "Stats":
        """Campaigns run side by side as one: counts added, the slowest of each opcode kept, the wall
        time the longest (they ran at once)."""
        m = cls()
        for x in parts:
            for name in ("commands", "programs", "readback_reads", "open_state_checks", "divergences", "hangs",
                         "restarts", "cycles"):
                setattr(m, name, getattr(m, name) + getattr(x, name))
            m.wall_s = max(m.wall_s, x.wall_s)
            m.per_opcode += x.per_opcode
            m.statuses += x.statuses
            m.op_cycles += x.op_cycles
            m.findings += x.findings
            for k, v in x.slowest.items():
                m.slowest[k] = max(m.slowest.get(k, 0), v)
        return m

    @classmethod
    def from_json(cls, d: dict) -> "Stats":
        s = cls(**{k: d[k] for k in ("commands", "programs", "readback_reads", "open_state_checks", "divergences",
                                     "hangs", "restarts", "cycles", "wall_s")})
        s.per_opcode = Counter(d["per_opcode"])
        s.statuses = Counter({(o, n): c for o, n, c in d["statuses"]})
        s.findings = list(d.get("findings", []))
        s.op_cycles = Counter(d.get("op_cycles", {}))
        s.slowest = dict(d.get("slowest", {}))
        return s


class Fuzzer:
    """The drive in ``run_dir`` (started by the caller) and the reference controller beside it."""

    def __init__(self, run_dir: Path | str, *, cfg: simctl.SimConfig = SIM_CONFIG, known: dict | None = None,
                 stats: Stats | None = None, log=None, gateware: Path | None = None):
        self.run_dir, self.cfg, self.gateware = Path(run_dir), cfg, gateware
        self.stats = stats or Stats()
        self.log = log or (lambda msg: None)
        self.nonce = 0
        self.failing: list[Cmd] = []          # the last program that failed: after Hypothesis, the shrunk one
        self._attach()
        self.known: dict[int, bytes] = {} if known is None else dict(known)   # the drive's blocks (zeros absent)
        memory = HostMemory()
        self.ref = NvmeController(memory, limits=self.limits, io_queues=len(QUEUES))
        self.ref_host = NvmeHost(self.ref, memory, io_queues=len(QUEUES)).initialize()
        self.model: Model = self.ref.model

    # -- the drive's link -----------------------------------------------------------------------------------
    def _attach(self) -> None:
        from atomflash.device import Device

        self.dev = Device.attach_sim_nvme(self.run_dir, io_queues=len(QUEUES), timeout=600)
        self.host, self.link = self.dev.host, self.dev._shared.link
        self.link.enable_interrupts(len(QUEUES) + 1)
        self.limits = Limits.from_identify(self.dev.identify())
        self.block = self.limits.lba_size
        self._cycle0 = self.link.status()["cycle"]

    def close(self) -> None:
        self._count_cycles()
        self.dev.close()

    def _count_cycles(self) -> None:
        now = self.link.status()["cycle"]
        self.stats.cycles += now - self._cycle0
        self._cycle0 = now

    def restart(self) -> None:
        """After a hang, or a simulator that ended: a power cut, the simulator started again on its images,
        what it holds read back."""
        self.stats.restarts += 1
        try:
            self.close()
        except Exception:           # noqa: BLE001  (a dead link)
            pass
        simctl.stop(self.run_dir, power_cut=True)
        simctl.start(self.run_dir, self.cfg, gateware=self.gateware)
        self._attach()
        self.known = self.read_back(range(self.limits.capacity))

    # -- one command on either side ---------------------------------------------------------------------------
    def _drive(self, qid: int, raw: Raw) -> tuple[Completion, bytes]:
        """Run ``raw`` on the drive: its completion, or :class:`Hang` past the simulated-time deadline."""
        return self._wait(qid, submit(self.host, qid, raw), raw.opcode)

    def _wait(self, qid: int, cid: int, opcode: int) -> tuple[Completion, bytes]:
        q = self.host.queues[qid]
        wall0 = time.monotonic()
        first_look = wall0 + FIRST_LOOK_S
        cycle0 = None
        while True:
            self.host.reap(qid)
            if cid in q.done:
                if qid:
                    self._account(opcode)
                return self.host._take(q, cid)
            self.link.wait_interrupt(qid, timeout=0.25)
            now = time.monotonic()
            if now < first_look:
                continue
            first_look = now + FIRST_LOOK_S
            cycle = self.link.status()["cycle"]
            if cycle0 is None:
                cycle0 = cycle
            elif cycle - cycle0 > DEADLINE_CYCLES or now - wall0 > DEAD_SIMULATOR_S:
                raise Hang(f"queue {qid} cid {cid} opcode {opcode:#04x}: no completion after "
                           f"{(cycle - cycle0) / CLOCK_HZ * 1e3:.0f} ms simulated ({now - wall0:.0f} s wall)")

    def _account(self, opcode: int) -> None:
        """The command's simulated time, from the stamps of the TLPs it made (its SQE fetch to its
        completion); the link's record of them is emptied so a long campaign does not keep them all."""
        with self.link._lock:
            tlps, self.link.device_tlps = self.link.device_tlps, []
        if tlps:
            cycles = tlps[-1].sent_cycle - tlps[0].sent_cycle
            name = op_name(opcode)
            self.stats.op_cycles[name] += cycles
            self.stats.slowest[name] = max(self.stats.slowest.get(name, 0), cycles)

    def _model(self, qid: int, raw: Raw) -> tuple[Completion, bytes]:
        return self.ref_host.wait(qid, submit(self.ref_host, qid, raw))

    # -- resolving references ---------------------------------------------------------------------------------
    def _open_tids(self, qid: int) -> list[int]:
        return sorted(t for q, t in self.model.tx if q == qid)

    def _live(self, qid: int) -> list[int]:
        """Drive tokens of the live appends of queue ``qid``, in slot order."""
        return [self.to_drive[a.token] for h, a in sorted(self.model.appends.items()) if a.owner == qid]

    def _tid(self, ref, qid: int) -> int:
        if isinstance(ref, int):
            return ref
        if ref.kind == "raw":
            return ref.arg
        tids = self._open_tids(qid if ref.kind == "open" else other_queue(qid))
        return tids[ref.index % len(tids)] if tids else ref.index + 1

    def _token(self, ref: TokenRef, qid: int) -> int:
        if ref.kind == "raw":
            return ref.arg
        pool = {"live": self._live(qid), "flip": self._live(qid), "other": self._live(other_queue(qid)),
                "spent": self.spent}[ref.kind]
        if not pool:
            pool = self.spent or [ref.index + 1]
        tok = pool[ref.index % len(pool)]
        return tok ^ (1 << ref.arg) if ref.kind == "flip" else tok

    def _model_token(self, drive_token: int) -> int:
        """The model's token for a drive token; an unknown one stays as it is (neither side issued it)."""
        return self.to_model.get(drive_token, drive_token)

    def _append_length(self, drive_token: int) -> int:
        a = self.model.appends.get(spec.split_token(self._model_token(drive_token)).handle)
        return len(a.blocks) if a is not None and a.token == self._model_token(drive_token) else 1

    def _data(self, blocks: int) -> bytes:
        """``blocks`` blocks no earlier write carried."""
        out = []
        for i in range(blocks):
            self.nonce += 1
            out.append(f"fuzz {self.nonce} block {i} ".encode().ljust(self.block, b"."))
        return b"".join(out)

    def concrete(self, c: Cmd) -> tuple[Raw, Raw, set[int]]:
        """The command for the drive, the same for the model (tokens translated), and the LBAs it may touch."""
        L, qid = self.limits, c.q
        noise = c.reserved
        fields_ = dict(nsid=c.nsid, cdw2=noise, cdw3=noise >> 1)
        touched: set[int] = set()

        def span(lba, n):
            if 0 <= lba < L.capacity:
                touched.update(range(lba, min(lba + max(n, 1), L.capacity)))

        def blocks_for(nlb_field, limit):
            n = nlb_field + 1
            return n if n <= limit else 1

        cdw12_noise = (noise & 0x3FFC) << 16          # reserved bits 18..29
        op, raw_kw, model_kw = c.op, {}, {}
        if op in (Io.WRITE, Io.TX_WRITE, Io.APPEND):
            cdw12 = c.nlb | cdw12_noise | c.fua << 30
            if op == Io.TX_WRITE:
                cdw12 |= c.final << 16 | c.new << 17
                fields_["cdw13"] = self._tid(c.tid, qid)
            elif noise:
                fields_["cdw13"] = noise
            fields_.update(slba=c.slba if op != Io.APPEND else 0, cdw12=cdw12)
            raw_kw["data_out"] = self._data(blocks_for(c.nlb, L.max_transfer))
            if op != Io.APPEND:
                span(c.slba, c.nlb + 1)
        elif op in (Io.READ, Io.TX_READ) or op not in set(int(o) for o in Io):
            fields_.update(slba=c.slba, cdw12=c.nlb | cdw12_noise)
            if op == Io.TX_READ:
                fields_["cdw13"] = self._tid(c.tid, qid)
            elif noise:
                fields_["cdw13"] = noise
            if op in (Io.READ, Io.TX_READ):
                raw_kw["data_in"] = blocks_for(c.nlb, L.max_transfer) * self.block
        elif op == Io.FLUSH:
            if noise:
                fields_.update(slba=noise, cdw12=noise, cdw13=noise)
        elif op == Io.WRITE_ZEROES:
            fields_.update(slba=c.slba, cdw12=c.nlb | cdw12_noise | c.fua << 30)
            span(c.slba, min(c.nlb + 1, L.capacity))
        elif op == Io.DATASET_MANAGEMENT:
            ranges = c.ranges or ((0, 1, 0),)
            fields_["slba"] = spec.NvmeField.NR.put(len(ranges) - 1) | spec.NvmeField.AD.put(c.ad) << 32
            raw_kw["data_out"] = b"".join(spec.NVME_DSM_RANGE.pack(slba=s, nlb=n, attributes=a) for s, n, a in ranges)
            for s, n, _ in ranges:
                span(s, min(n, L.capacity))
        elif op == Io.ATOMIC_WRITE:
            n = len(c.lbas)
            fields_["cdw12"] = (n - 1) & 0xFFFF | cdw12_noise
            if 1 <= n <= L.max_atomic_pages:
                raw_kw["data_out"] = self._data(n)
                raw_kw["metadata"] = b"".join(x.to_bytes(8, "little") for x in c.lbas)
            else:
                raw_kw["data_out"] = self._data(1)       # not fetched: more than the drive takes
            for x in c.lbas:
                span(x, 1)
        elif op == Io.TX_COMMIT or op == Io.TX_ABORT:
            fields_["cdw13"] = self._tid(c.tid, qid)
        elif op == Io.REMAP:
            n = len(c.triples)
            fields_["cdw12"] = (n - 1) & 0xFFFF | cdw12_noise
            drive_entries = []
            for lba, ref, nlb in (c.triples if n <= L.max_remap_triples else c.triples[:1]):
                tok = self._token(ref, qid)
                nlb = self._append_length(tok) if nlb is None else nlb
                drive_entries.append((lba, tok, nlb))
                span(lba, min(nlb, L.capacity))
            raw_kw["data_out"] = b"".join(spec.NVME_REMAP_ENTRY.pack(lba=a, token=t, nlb=b) for a, t, b in drive_entries)
            model_kw["data_out"] = b"".join(spec.NVME_REMAP_ENTRY.pack(lba=a, token=self._model_token(t), nlb=b)
                                            for a, t, b in drive_entries)
        elif op == Io.RELEASE:
            tok = self._token(c.token or TokenRef("live"), qid)
            fields_["cdw14_15"] = tok
            model_kw["fields"] = {**fields_, "cdw14_15": self._model_token(tok)}
        elif op == Io.HINT:
            fields_["cdw13"] = c.hint
        common = dict(opcode=op, fuse=c.fuse, psdt=c.psdt, offset=c.offset, mptr_offset=c.mptr_offset)
        drive = Raw(fields=fields_, **common, **raw_kw)
        model = Raw(**{**common, "fields": fields_, **raw_kw, **model_kw})
        return drive, model, touched

    # -- a program ----------------------------------------------------------------------------------------------
    def _queue_for(self, c: Cmd) -> Cmd:
        """A command naming "an open tid" or "a live token" of its queue moves to the other queue when only
        that one has any, so transactions and appends get committed and remapped, not only refused."""
        wants_tid = isinstance(c.tid, TidRef) and c.tid.kind == "open"
        refs = [t for _, t, _ in c.triples] + ([c.token] if c.token is not None else [])
        wants_token = any(isinstance(r, TokenRef) and r.kind in ("live", "flip") for r in refs)
        other = other_queue(c.q)
        if (wants_tid and not self._open_tids(c.q) and self._open_tids(other)) or \
                (wants_token and not self._live(c.q) and self._live(other)):
            return replace(c, q=other)
        return c

    def step(self, c: Cmd, where: str = "") -> None:
        """Run one command on both sides and compare."""
        c = self._queue_for(c)
        drive_raw, model_raw, touched = self.concrete(c)
        self.touched |= touched
        self.tids_named.add((c.q, drive_raw.fields.get("cdw13", 0)))
        got, got_data = self._drive(c.q, drive_raw)
        want, want_data = self._model(c.q, model_raw)
        name = op_name(c.op)
        self.stats.commands += 1
        self.stats.per_opcode[name] += 1
        self.stats.statuses[(name, status_name(got.sct, got.sc))] += 1
        if (got.sct, got.sc) != (want.sct, want.sc):
            raise Divergence(f"{where}{c!r}: the drive answered {status_name(got.sct, got.sc)}, "
                             f"the model {status_name(want.sct, want.sc)}")
        if c.op == Io.APPEND and got.ok:
            self.to_model[got.result] = want.result
            self.to_drive[want.result] = got.result
            self.appended.append((c.q, got.result))
        elif got.result != want.result:
            raise Divergence(f"{where}{c!r}: completion DW0-DW1 {got.result:#x}, the model's {want.result:#x}")
        if got.ok and got_data != want_data:
            bad = next(i for i in range(0, len(want_data), self.block)
                       if got_data[i:i + self.block] != want_data[i:i + self.block]) // self.block
            raise Divergence(f"{where}{c!r}: block {bad} of the data differs from the model's "
                             f"(drive {got_data[bad * self.block:][:24]!r}, model {want_data[bad * self.block:][:24]!r})")
        if c.op in (Io.REMAP, Io.RELEASE) and got.ok:
            live = {a.token for a in self.model.appends.values()}
            self.spent = [t for t in self.to_model if self.to_model[t] not in live][-8:]

    def run_program(self, program: list[Cmd]) -> None:
        """A program from the drive's current state; its teardown leaves nothing open on either side.
        Raises :class:`Divergence` or :class:`Hang`."""
        self.model = self.ref.model = Model(self.limits, initial=self.known)
        self.to_model, self.to_drive, self.appended = {}, {}, []
        self.spent: list[int] = []
        self.touched: set[int] = set()
        self.tids_named: set[tuple[int, int]] = set()
        self.stats.programs += 1
        try:
            for i, c in enumerate(program):
                self.step(c, f"command {i}: ")
            if self.model.tx or self.model.appends:
                self.compare_open_state()
            self.teardown()
            self.compare_blocks()
        except PcieLinkError:
            raise
        except Hang as e:
            self.failing = list(program)
            e.add_note(f"program: {program!r}")
            if self.stats.restarts >= ABORT_RESTARTS:
                raise
            self.restart()
            raise
        except Exception as e:
            self.failing = list(program)
            e.add_note(f"program: {program!r}")
            self.recover()
            raise

    def teardown(self) -> None:
        """Abort what the program left open and release what it left appended, on both sides (compared)."""
        for qid, tid in sorted(self.model.tx):
            self.step(Cmd(int(Io.TX_ABORT), q=qid, tid=tid), "teardown: ")
        for h, a in sorted(self.model.appends.items()):
            self.step(Cmd(int(Io.RELEASE), q=a.owner, token=TokenRef("raw", 0, self.to_drive[a.token])), "teardown: ")

    def recover(self) -> None:
        """After a divergence: abort every tid the program named, on every queue, release every token the
        drive issued, then take what the drive holds as known (nothing compared)."""
        for qid in QUEUES:
            for tid in sorted({t for _, t in self.tids_named} - {0}):
                self._drive(qid, Raw(int(Io.TX_ABORT), dict(nsid=spec.NVME.NSID, cdw13=tid)))
        for qid, tok in self.appended:
            self._drive(qid, Raw(int(Io.RELEASE), dict(nsid=spec.NVME.NSID, cdw14_15=tok)))
        lbas = self.touched | set(self.known)
        self.known.update(self.read_back(sorted(lbas)))
        self.known = {k: v for k, v in self.known.items() if any(v)}

    def read_back(self, lbas) -> dict[int, bytes]:
        """The drive's blocks at ``lbas`` (runs of neighbours in one READ each); zero blocks left out."""
        lbas, out, i = sorted(lbas), {}, 0
        wanted = set(lbas)
        while i < len(lbas):
            j = i
            while j + 1 < len(lbas) and lbas[j + 1] - lbas[j] <= GAP and lbas[j + 1] - lbas[i] < self.limits.max_transfer:
                j += 1
            n = lbas[j] - lbas[i] + 1
            c, data = self._drive(QUEUES[0], Raw(int(Io.READ), dict(nsid=spec.NVME.NSID, slba=lbas[i], cdw12=n - 1),
                                                 data_in=n * self.block))
            self.stats.readback_reads += 1
            if not c.ok:
                raise Divergence(f"read-back of LBAs {lbas[i]}..{lbas[j]}: {status_name(c.sct, c.sc)}")
            for k in range(n):
                block = data[k * self.block:(k + 1) * self.block]
                if any(block) and lbas[i] + k in wanted:
                    out[lbas[i] + k] = block
            i = j + 1
        return out

    def compare_blocks(self) -> None:
        """Every LBA the program changed in the model, and a few it touched and left as they were."""
        want = {k: v for k, v in self.model.contents().items() if any(v)}
        changed = {k for k in set(want) | set(self.known) if want.get(k) != self.known.get(k)}
        kept = sorted(self.touched - changed)
        check = changed | set(kept[::max(1, len(kept) // UNMAPPED_SAMPLE)][:UNMAPPED_SAMPLE])
        got = self.read_back(check)
        for lba in sorted(check):
            if got.get(lba) != want.get(lba):
                raise Divergence(f"after the program LBA {lba} holds {got.get(lba, bytes(24))[:24]!r} on the drive, "
                                 f"{want.get(lba, bytes(24))[:24]!r} in the model")
        self.known = want

    def compare_open_state(self) -> None:
        """The open-state log page: the transactions the model has open, each with the pages it has written
        (OPEN_TX.pages: rewrites of an LBA count), and appends of the model's lengths."""
        self.stats.open_state_checks += 1
        got_tx, got_ap = self.open_state()
        want_tx = sorted((tid, written) for (_, tid), written in self.model.tx_written.items())
        want_ap = sorted(len(a.blocks) for a in self.model.appends.values())
        if (got_tx, got_ap) != (want_tx, want_ap):
            raise Divergence(f"open state: the drive has transactions (tid, blocks) {got_tx} and appends {got_ap}, "
                             f"the model {want_tx} and {want_ap}")

    def open_state(self) -> tuple[list, list]:
        """The drive's open-state log page (admin Get Log Page, under the same simulated-time deadline as
        every command): sorted (tid, pages) of its open transactions and blocks of its live appends."""
        L, F = self.limits, spec.NvmeField
        size = spec.OPEN_TX.size * L.max_open_tx + spec.OPEN_APPEND.size * L.max_appends
        numd = size // 4 - 1
        cdw10 = F.LID.put(int(spec.NvmeLogPage.ATOMFLASH_OPEN)) | F.NUMDL.put(numd & 0xFFFF)
        cid = self.host.submit(0, spec.NvmeAdminOpcode.GET_LOG_PAGE, nsid=F.NSID_ALL, data_in=size,
                               slba=cdw10 | F.NUMDU.put(numd >> 16) << 32)
        c, page = self._wait(0, cid, int(spec.NvmeAdminOpcode.GET_LOG_PAGE))
        if not c.ok:
            raise Divergence(f"the open-state log page: {status_name(c.sct, c.sc)}")
        txs = [spec.OPEN_TX.unpack(page[i * spec.OPEN_TX.size:(i + 1) * spec.OPEN_TX.size])
               for i in range(L.max_open_tx)]
        base = L.max_open_tx * spec.OPEN_TX.size
        apps = [spec.OPEN_APPEND.unpack(page[base + i * spec.OPEN_APPEND.size:base + (i + 1) * spec.OPEN_APPEND.size])
                for i in range(L.max_appends)]
        return sorted((t.tid, t.pages) for t in txs if t.tid), sorted(a.nlb for a in apps if a.token)

    def sweep(self) -> None:
        """Every LBA read back and compared with what the fuzzer believes the drive holds."""
        got = self.read_back(range(self.limits.capacity))
        if got != self.known:
            bad = sorted(set(got) ^ set(self.known) | {k for k in got if self.known.get(k) != got[k]})
            raise Divergence(f"sweep: LBAs {bad[:16]} differ from what the programs left")


def other_queue(qid: int) -> int:
    return QUEUES[1] if qid == QUEUES[0] else QUEUES[0]


# Set (SIGUSR1 from ``make fuzz``'s parent) when the workers together have run the campaign's commands:
# the programs left in a Hypothesis run are skipped and the worker ends.
STOP = threading.Event()


def check_programs(fuzzer: Fuzzer, *, examples: int, seed: int | None = None, min_commands: int = 4,
                   max_commands: int = 24, derandomize: bool = False) -> None:
    """Hypothesis over :meth:`Fuzzer.run_program`: ``examples`` programs (none once :data:`STOP` is set); a
    failure is shrunk and raised with its shortest program."""
    @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(programs(fuzzer.limits, min_commands=min_commands, max_commands=max_commands))
    def fuzz(program):
        if not STOP.is_set():
            fuzzer.run_program(program)

    if seed is not None and not derandomize:
        fuzz = hypothesis_seed(seed)(fuzz)
    fuzz()


# == make fuzz =============================================================================================
def write_report(stats: Stats, path: Path, *, limits: Limits, cfg: simctl.SimConfig, target: int, seed: int,
                 finished: bool, workers: int = 1) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"target_commands": target, "seed": seed, "workers": workers, "finished": finished, **stats.as_json(),
            "limits": limits.__dict__, "sim": {"channels": cfg.channels, "ways": cfg.ways, "profile": cfg.profile,
                                               "blocks_per_lun": cfg.blocks_per_lun, "queues": list(QUEUES)}}
    path.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    distinct = sorted({s for _, s in stats.statuses})
    sim_s = stats.cycles / CLOCK_HZ
    lines = [
        "# Fuzzing the NVMe command interface",
        "",
        "Generated by `make fuzz`; do not edit by hand.  How it works: [fuzz](../fuzz.md).",
        "",
        f"{'Finished' if finished else 'Running (partial figure)'}: **{stats.commands:,} commands** "
        f"in {stats.programs:,} programs (target {target:,}, seed {seed}"
        f"{f', {workers} simulators side by side' if workers > 1 else ''}) against the reference controller: "
        f"**{stats.divergences} divergences, {stats.hangs} hangs**; {len(distinct)} distinct statuses hit; "
        f"{stats.readback_reads:,} read-back READs and {stats.open_state_checks:,} open-state comparisons on top.",
        f"The drive ran {sim_s:.2f} s of simulated time ({stats.cycles:,} cycles at {CLOCK_HZ / 1e6:.0f} MHz) in "
        f"{stats.wall_s / 3600:.2f} h of wall time ({stats.commands / max(stats.wall_s, 1e-9):.2f} commands per wall "
        f"second on a shared machine).",
        "",
        f"Drive: the simulated SoC (`SimConfig(nvme=True)`: {cfg.channels} channels x {cfg.ways} ways, NAND profile "
        f"`{cfg.profile}`, {cfg.blocks_per_lun} blocks per LUN), I/O queues {', '.join(map(str, QUEUES))}, one "
        f"command at a time.  Limits: capacity {limits.capacity} LBAs of {limits.lba_size} B, max_transfer "
        f"{limits.max_transfer}, max_atomic_pages {limits.max_atomic_pages}, max_open_tx {limits.max_open_tx}, "
        f"max_pending {limits.max_pending}, max_remap_triples {limits.max_remap_triples}, max_appends "
        f"{limits.max_appends}.  The model: `NvmeController` on `Model` with the same limits.",
        "",
        "## Commands and statuses per opcode",
        "",
        "Simulated time from the command's SQE fetch to its completion, read-backs included under READ.",
        "",
        "| opcode | commands | mean us | slowest us | statuses (count) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    us = 1e6 / CLOCK_HZ
    for name, n in sorted(stats.per_opcode.items(), key=lambda kv: -kv[1]):
        hit = sorted(((s, c) for (o, s), c in stats.statuses.items() if o == name), key=lambda sc: -sc[1])
        runs = n + (stats.readback_reads if name == "READ" else 0)
        lines.append(f"| {name} | {n:,} | {stats.op_cycles.get(name, 0) / max(runs, 1) * us:.1f} | "
                     f"{stats.slowest.get(name, 0) * us:.1f} | {', '.join(f'{s} ({c:,})' for s, c in hit)} |")
    lines += ["", "## Distinct statuses hit", "", "SCT/SC and atomflash's name (`spec.atomflash_status_of`) where it "
              "has one.", ""]
    lines += [f"* {s}" for s in distinct]
    if stats.findings:
        lines += ["", "## Findings", ""] + [f"* {f}" for f in stats.findings]
    if path.with_suffix(".png").exists():
        lines += ["", f"![statuses per opcode]({path.with_suffix('.png').name})"]
    path.write_text("\n".join(lines) + "\n")


def plot(stats: Stats, path: Path) -> None:
    """Statuses hit per opcode: a count matrix, log-coloured."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    import numpy as np

    ops = sorted(stats.per_opcode, key=lambda o: -stats.per_opcode[o])
    sts = sorted({s for _, s in stats.statuses})
    m = np.array([[stats.statuses.get((o, s), 0) for o in ops] for s in sts], dtype=float)
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * len(ops), 1.0 + 0.32 * len(sts)))
    im = ax.imshow(np.where(m > 0, m, np.nan), norm=LogNorm(vmin=1, vmax=max(1, m.max())), cmap="viridis",
                   aspect="auto")
    ax.set_xticks(range(len(ops)), ops, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(sts)), sts, fontsize=7)
    ax.set_title(f"make fuzz: {stats.commands:,} commands, statuses per opcode", fontsize=9)
    fig.colorbar(im, ax=ax, label="commands")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def run_workers(args) -> int:
    """``args.workers`` campaigns side by side (``python -m sim.fuzz --workers 1`` in ``--dir``/w<k>, seed
    ``seed * 1000 + k``), their state merged into ``--report`` every minute and at the end.  They share one
    target: each runs until told (SIGUSR1) that together they have run ``--commands``, so a slower drive
    does not hold the figure up, and a resumed campaign may have more or fewer workers.  Each one resumes
    on its own; the figure is finished when every worker is."""
    work, n = Path(args.dir), args.workers
    simctl.build(SIM_CONFIG)            # once, before the workers look for it
    procs, dirs = [], [work / f"w{k}" for k in range(n)]
    for k, wdir in enumerate(dirs):
        wdir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "sim.fuzz", "--workers", "1", "--commands", str(args.commands),
               "--examples", str(args.examples), "--max-commands", str(args.max_commands),
               "--seed", str(args.seed * 1000 + k), "--dir", str(wdir), "--report", str(wdir / "fuzz.md"),
               "--shrink-seconds", str(args.shrink_seconds), *(["--fresh"] if args.fresh else [])]
        with open(wdir / "fuzz.log", "a") as log:
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    print(f"fuzz: {n} workers, logs in {', '.join(str(d / 'fuzz.log') for d in dirs)}", flush=True)

    def stop(*_):
        for q in procs:
            q.terminate()
        sys.exit(128 + signal.SIGTERM)
    signal.signal(signal.SIGTERM, stop)

    def merge(final: bool) -> bool:
        reports = [json.loads((d / "fuzz.json").read_text()) for d in dirs if (d / "fuzz.json").exists()]
        if not reports:
            return False
        stats = Stats.merged([Stats.from_json(r) for r in reports])
        if stats.commands >= args.commands:
            for q in procs:
                if q.poll() is None:
                    q.send_signal(signal.SIGUSR1)
        finished = final and len(reports) == n and all(r["finished"] for r in reports) and \
            stats.commands >= args.commands
        path = Path(args.report)
        if final:
            try:
                plot(stats, path.with_suffix(".png"))
            except Exception as e:      # noqa: BLE001  (the figure stands without its picture)
                print(f"fuzz: no plot: {e}", flush=True)
        write_report(stats, path, limits=Limits(**reports[0]["limits"]), cfg=SIM_CONFIG, target=args.commands,
                     seed=args.seed, finished=finished, workers=n)
        print(f"fuzz: {stats.commands:,} of {args.commands:,} commands ({stats.commands / max(stats.wall_s, 1):.2f}/s), "
              f"{stats.divergences} divergences, {stats.hangs} hangs", flush=True)
        return finished

    try:
        while any(q.poll() is None for q in procs):
            time.sleep(60)
            merge(False)
    finally:
        for q in procs:
            if q.poll() is None:
                q.terminate()
    finished = merge(True)
    codes = [q.wait() for q in procs]
    return 0 if finished and not any(codes) else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commands", type=int, default=100_000, help="commands to run (programs continue until then)")
    ap.add_argument("--examples", type=int, default=200, help="programs per Hypothesis run (each run a new seed)")
    ap.add_argument("--max-commands", type=int, default=24, help="longest program")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default="build/fuzz", help="the simulation's run directory and the campaign's state")
    ap.add_argument("--report", default="docs/results/fuzz.md")
    ap.add_argument("--fresh", action="store_true", help="start over (default: go on from the state in --dir)")
    ap.add_argument("--shrink-seconds", type=int, default=1800, help="how long Hypothesis may shrink a failure")
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1),
                    help="simulators side by side, each a campaign of its own share in --dir/w<k> with its own "
                         "seed; the report adds them up (default: one per core, at most 4)")
    args = ap.parse_args(argv)
    if args.workers > 1:
        return run_workers(args)

    from hypothesis.internal.conjecture import engine
    engine.MAX_SHRINKING_SECONDS = args.shrink_seconds
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))   # stop the simulator on the way out
    signal.signal(signal.SIGUSR1, lambda *_: STOP.set())                          # the campaign's total is reached
    work = Path(args.dir)
    run_dir, state_path = work / "run", work / "campaign.json"
    state = None if args.fresh or not state_path.exists() else json.loads(state_path.read_text())
    stats = Stats.from_json(state["stats"]) if state else Stats()
    chunk = state["chunk"] if state else 0

    def log(msg):
        print(f"fuzz: {msg}", flush=True)

    if simctl.status(run_dir)["running"]:
        simctl.stop(run_dir, power_cut=True)
    # a copy of the build: a rebuild of the shared one (a test, a firmware change) would kill this simulator
    gateware = simctl.freeze_gateware(simctl.build(SIM_CONFIG), work / "gateware")
    simctl.start(run_dir, SIM_CONFIG, fresh=state is None, gateware=gateware)
    fuzzer = Fuzzer(run_dir, stats=stats, known={} if state is None else None, log=log, gateware=gateware)
    if state is not None:
        fuzzer.known = fuzzer.read_back(range(fuzzer.limits.capacity))
    started = time.monotonic() - stats.wall_s
    failed = None
    try:
        while stats.commands < args.commands and not STOP.is_set():
            before = stats.commands
            t0 = time.monotonic()
            try:
                left = args.commands - stats.commands      # a program averages about half the longest
                check_programs(fuzzer, examples=max(1, min(args.examples, 2 * left // args.max_commands)),
                               seed=args.seed * 1_000_003 + chunk, max_commands=args.max_commands)
            except (Divergence, Hang) as e:
                kind = "hang" if isinstance(e, Hang) else "divergence"
                if isinstance(e, Hang):
                    stats.hangs += 1
                else:
                    stats.divergences += 1
                finding = f"{kind}: {e} -- shrunk program: {fuzzer.failing!r}"
                stats.findings.append(finding)
                log(finding)
                failed = e
            except PcieLinkError as e:
                # the simulator ended under the fuzzer (killed from outside): not the drive's answer
                log(f"the simulator ended ({e}; exit {simctl.status(run_dir).get('exit')}): starting it again")
                fuzzer.restart()
            chunk += 1
            stats.wall_s = time.monotonic() - started
            fuzzer._count_cycles()
            log(f"chunk {chunk}: {stats.commands - before} commands in {time.monotonic() - t0:.0f} s; "
                f"{stats.commands:,} of {args.commands:,} ({stats.commands / stats.wall_s:.2f}/s), "
                f"{stats.divergences} divergences, {stats.hangs} hangs")
            state_path.write_text(json.dumps({"chunk": chunk, "stats": stats.as_json()}) + "\n")
            write_report(stats, Path(args.report), limits=fuzzer.limits, cfg=SIM_CONFIG, target=args.commands,
                         seed=args.seed, finished=False)
            if failed is not None:
                break
        if failed is None:
            fuzzer.sweep()
    finally:
        stats.wall_s = time.monotonic() - started
        try:
            fuzzer.close()
        finally:
            simctl.stop(run_dir, power_cut=True)
    state_path.write_text(json.dumps({"chunk": chunk, "stats": stats.as_json()}) + "\n")
    try:
        plot(stats, Path(args.report).with_suffix(".png"))
    except Exception as e:      # noqa: BLE001  (the figure stands without its picture)
        log(f"no plot: {e}")
    write_report(stats, Path(args.report), limits=fuzzer.limits, cfg=SIM_CONFIG, target=args.commands,
                 seed=args.seed, finished=failed is None and (stats.commands >= args.commands or STOP.is_set()))
    log(f"{stats.commands:,} commands, {stats.divergences} divergences, {stats.hangs} hangs -> {args.report}")
    return 0 if failed is None else 1


if __name__ == "__main__":
    sys.exit(main())
