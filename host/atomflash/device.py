"""``atomflash.Device``: the host side of atomflash's NVMe-shaped interface.

A host owns one queue pair of the controller's host-queue front-end
(``spec.HOST_REGS``, docs/host_queues.md) and a region of memory the
controller can DMA to and from (on the simulated SoC the ``hostmem`` SRAM; on
a board, host memory behind PCIe).  It writes 64-byte ``spec.CMD`` entries
into its submission queue, rings the tail doorbell, and collects 16-byte
``spec.CPL`` entries from its completion queue by their phase bit.  Data and
lists (ATOMIC_ENTRY[], REMAP_ENTRY[]) live in host memory, named by address
in the command.  How register and memory words move is the transport's
business (:mod:`atomflash.transport`).

Every verb has a blocking form (``dev.write(lba, data)``) that raises the
status's exception (:mod:`atomflash.errors`: ``UnknownTx``, ``InvalidToken``,
...), and the primitive :meth:`Device.submit` / :meth:`Device.wait` pair
keeps several commands in flight (queue depth > 1)::

    dev = Device.attach_sim("build/run")          # a running `atomflash sim start`
    dev.write(0, b"x" * dev.lba_size)
    dev.atomic_write([(1, a), (7, b)])            # all or nothing
    with dev.transaction() as tx:                 # commit on success, abort on exception
        tx.write(3, c)
        old = tx.read(4)
    token = dev.append(d)                         # staged, bound to no LBA
    dev.remap([(9, token, 1)])                    # bound atomically
    cmds = [dev.submit_write(lba, blk) for lba, blk in work]   # in flight together
    for c in cmds: dev.wait(c)

Transaction ids are the host's choice (any nonzero 32-bit value) and
belong to the queue pair that opens them: each queue has its own ids, and
a command on another queue never finds the transaction (``UNKNOWN_TX``, as
for an id nobody opened); an append's token is likewise usable only on the
queue that appended (``INVALID_TOKEN`` elsewhere).  So that two hosts on one
queue (two processes, or an application and the CLI) never silently share a
transaction, the write that opens one carries the ``tx_new`` flag
(``CmdFlag.TX_NEW``): the device opens the tid only if the queue does not
have it open, else the command completes ``TID_IN_USE`` and changes
nothing.  :meth:`Device.transaction` and :meth:`Device.new_tid` draw ids at
random from the whole 32-bit space (never one this host has open), and
:meth:`Device.transaction` opens with ``tx_new``, drawing another id if the
device says the first is in use.  ``dev.tx_write(tid, ..., new=True)`` does
the same for an id of the caller's.  :meth:`Device.open_list` asks the
device what is open, e.g. after a restart of the host: on the debug port,
the transactions and live appends this queue pair owns (another queue's
tokens are not its to see); over NVMe, log page C1h through the admin
queue, every queue's (the admin queue is the host's administrator).

Failures: every exception is one of :mod:`atomflash.errors`.  A command the
library refuses before sending it (a value that does not fit its field)
raises its status's class and holds nothing.  Whatever fails, the host
memory a command took is given back: on its completion (any status), when
it is refused, or when the link is lost (the Device is then unusable:
every later call raises :class:`~atomflash.errors.TransportError`).  Each
command has a timeout (``Device(timeout=)``, ``submit(timeout=)``, in
seconds of the Device's ``clock``: the simulator's CPU time for a
simulated drive, else the wall clock's): a
command not completed within it raises
:class:`~atomflash.errors.CommandTimeout` from whatever call waits, and
stays in flight (with its buffers: the device may still complete it).

Several host queues
-------------------

A device has ``hostq.queues`` queue pairs; the last is the firmware's own,
the others (``qid`` 0 .. queues - 2) are the host's.  One :class:`Device`
drives one pair; several Devices on one transport drive several pairs of
the same device (the simulated SoC's UARTBone takes one TCP connection, so
they must share it)::

    devs = Device.attach_sim_all("build/run")     # every host queue, one connection
    a, b = devs
    ca = a.submit_write(0, blk0); cb = b.submit_write(1, blk1)   # in flight on two queues
    Device.poll_any(devs, block=True)             # completions of both, one register burst
    devs.close()

    dev = Device.attach_sim("build/run", qid=1)   # one queue, its own connection

Host memory is split into equal slices, one per host queue
(:func:`hostmem_slices`): queue ``qid`` keeps its rings and its data
buffers in slice ``qid`` only, so Devices never overlap whoever opened
them.  Devices on one transport share transaction ids (:meth:`Device.new_tid`
never hands out one another queue has open) and the transport: closing the
last of them closes it.  A Device is not thread-safe, nor are Devices that
share a transport: drive them from one thread.

Over NVMe
---------

The same Device, verbs and exceptions on an I/O queue of an NVMe drive:
:class:`atomflash.nvme.NvmeHost` brings the controller up and owns the admin
queue and host memory, and each :class:`NvmeDevice` (a Device) owns one I/O
queue, its verbs sent as NVMe and vendor I/O commands (docs/nvme.md)::

    host = NvmeHost(link, memory, io_queues=2)    # link: BAR0 (the reference NvmeController, a simulated PCIe device)
    dev = Device.attach_nvme(host, qid=1)         # initializes the host if it was not
    # or: devs = Device.attach_nvme_all(host)     # a DeviceSet, one Device per I/O queue

Submission and completion are the one place the two differ
(:meth:`Device._send`, :meth:`Device._reap`); see :class:`NvmeDevice` for
how NVMe statuses and Identify map onto the debug port's.
"""

from __future__ import annotations

import csv
import itertools
import random
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from . import errors, spec
from .errors import (BadQueue, CommandTimeout, DeviceError, HostMemoryFull, InvalidArgument, ReadyTimeout,
                     TransportError)
from .spec import Hint, LogPage, Opcode, Status
from .specdsl import SpecError

__all__ = ["Device", "NvmeDevice", "DeviceSet", "Layout", "Command", "Transaction", "OpenList", "DeviceError",
           "BadQueue", "HostMemoryFull", "hostmem_slices", "DEFAULT_TIMEOUT", "LINK_TIMEOUT"]

HQ = spec.HOST_REGS
FUA = spec.CMD.compose("flags", fua=1)
TX_FINAL = spec.CMD.compose("flags", tx_final=1)
TX_NEW = spec.CMD.compose("flags", tx_new=1)
DEFAULT_TIMEOUT = 30.0  # wall seconds a command may take (the simulated drive's slowest take a few)
LINK_TIMEOUT = 15.0     # wall seconds of silence on the link before it counts as lost
ETHERBONE_TRY_SECONDS = 2.0   # a simulated Etherbone request unanswered this long is sent again
SIM_LINKS = ("nvme", "debug", "etherbone")   # attach_sim's ports
# a TX_WRITE failing with these may have opened its transaction (its pages failed, not the command)
_MAY_HAVE_OPENED = {Status.MEDIA_ERROR, Status.NO_SPACE, Status.DATA_TRANSFER_ERROR, Status.INTERNAL_ERROR}
# the status a command gets for a value that does not fit its field (the library refuses it unsent)
_FIELD_STATUS = {"lba": Status.LBA_OUT_OF_RANGE, "nlb": Status.TRANSFER_TOO_LARGE, "tid": Status.INVALID_TID,
                 "token": Status.INVALID_TOKEN, "nlist": Status.LIST_TOO_LONG}
CONFIG_ERROR = next(b.mask for b in HQ["status"].bits if b.name == "config_error")


@dataclass(frozen=True)
class CsrMap:
    """A LiteX build's ``csr.csv``: its CSRs (name -> byte address, 32-bit
    words, most significant word first), memory regions (name -> base,
    size) and integer constants (``soc.h``'s, lower case)."""

    registers: dict[str, tuple[int, int]]
    regions: dict[str, tuple[int, int]]
    constants: dict[str, int] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path | str) -> "CsrMap":
        registers, regions, constants = {}, {}, {}
        with open(path, newline="") as f:
            for row in csv.reader(f):
                if not row or row[0].startswith("#"):
                    continue
                if row[0] == "csr_register":
                    registers[row[1]] = (int(row[2], 0), int(row[3]))
                elif row[0] == "memory_region":
                    regions[row[1]] = (int(row[2], 0), int(row[3], 0))
                elif row[0] == "constant":
                    try:
                        constants[row[1]] = int(row[2], 0)
                    except ValueError:
                        pass   # a string constant (the CPU's name, ...)
        return cls(registers, regions, constants)

    def group(self, prefix: str) -> dict[str, tuple[int, int]]:
        """The registers of one CSR block (``prefix`` + ``_``), named without it."""
        return {name[len(prefix) + 1:]: reg for name, reg in self.registers.items() if name.startswith(prefix + "_")}


@dataclass(frozen=True)
class Layout:
    """Where the host finds the controller and its memory, as byte addresses."""

    ctrl_base: int      # the controller window: host queue registers at offset 0
    hostmem_base: int   # memory the controller's DMA reaches: queues and data buffers
    hostmem_size: int

    @classmethod
    def from_csr_csv(cls, path: Path | str) -> "Layout":
        """From LiteX's ``csr.csv`` (``memory_region`` rows ``afctrl`` and ``hostmem``)."""
        regions = CsrMap.read(path).regions
        missing = {"afctrl", "hostmem"} - set(regions)
        if missing:
            raise DeviceError(f"{path}: no memory region {', '.join(sorted(missing))} (a build without the host port?)")
        return cls(regions["afctrl"][0], *regions["hostmem"])


SLICE_ALIGN = 4096  # host-memory slices start on 4 KiB boundaries


def hostmem_slices(layout: Layout, host_queues: int) -> list[tuple[int, int]]:
    """(base, size) of each host queue's slice of host memory: ``host_queues``
    equal, 4 KiB-aligned, non-overlapping slices of ``layout``'s hostmem, slice
    ``qid`` for queue pair ``qid``."""
    if host_queues < 1:
        raise DeviceError(f"the device offers {host_queues} host queues")
    size = layout.hostmem_size // host_queues // SLICE_ALIGN * SLICE_ALIGN
    if size < SLICE_ALIGN:
        raise DeviceError(f"{layout.hostmem_size} bytes of host memory do not split into {host_queues} slices")
    return [(layout.hostmem_base + q * size, size) for q in range(host_queues)]


class _Shared:
    """What the Devices on one transport share: how many use it (the last to
    close closes it), the transaction ids this host opened (device-wide, not
    per queue) and whether the link was lost."""

    def __init__(self):
        self.users = 0
        self.tids = random.SystemRandom()
        self.open_tids: set[int] = set()
        self.attached: dict[int, "Device"] = {}  # qid -> its open Device
        self.lost: TransportError | None = None
        self.link = None                           # a link the last Device to close closes (attach_sim_nvme's)


_SHARED: "weakref.WeakKeyDictionary[object, _Shared]" = weakref.WeakKeyDictionary()


def _shared(transport) -> _Shared:
    try:
        return _SHARED.setdefault(transport, _Shared())
    except TypeError:  # a transport that takes no weak reference: its own state
        return _Shared()


def _loopback(host: str) -> bool:
    import ipaddress
    import socket

    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


class _SimClock:
    """The simulator's CPU seconds (user + system, from /proc): a simulated drive runs at the same
    speed in that time however busy the machine is, and one that hangs (a firmware or core stuck
    in a loop) still spins the simulator, so its commands still time out.  The wall clock where
    the process cannot be read; a simulator that ended stands still (the link reports it)."""

    def __init__(self, pid: int | None):
        from .simctl import cpu_seconds

        self._cpu = cpu_seconds
        self.pid = pid
        self.last = None
        self.wall = cpu_seconds(pid) is None

    def __call__(self) -> float:
        if self.wall:
            return time.monotonic()
        cpu = self._cpu(self.pid)
        if cpu is not None:
            self.last = cpu
        return self.last


class _Allocator:
    """First-fit allocator over [base, base + size) in 64-byte units."""

    UNIT = 64

    def __init__(self, base: int, size: int):
        self.free = [(base, size)]

    def alloc(self, n: int) -> int | None:
        n = -(-max(n, 1) // self.UNIT) * self.UNIT
        for i, (b, s) in enumerate(self.free):
            if s >= n:
                self.free[i] = (b + n, s - n)
                if self.free[i][1] == 0:
                    del self.free[i]
                return b
        return None

    def release(self, addr: int, n: int) -> None:
        n = -(-max(n, 1) // self.UNIT) * self.UNIT
        self.free.append((addr, n))
        self.free.sort()
        merged = []
        for b, s in self.free:
            if merged and merged[-1][0] + merged[-1][1] == b:
                merged[-1] = (merged[-1][0], merged[-1][1] + s)
            else:
                merged.append((b, s))
        self.free = merged


@dataclass
class Command:
    """A submitted command; :meth:`Device.wait` fills ``status``/``result``/``data``."""

    cid: int
    opcode: Opcode
    detail: str
    buf: int = 0            # host memory taken (released on completion)
    buf_bytes: int = 0
    read_bytes: int = 0     # bytes to fetch from buf on completion (reads)
    read_addr: int = 0
    done: bool = False
    status: Status | None = None
    result: int = 0
    data: bytes = b""
    submitted: float = field(default_factory=time.monotonic)
    deadline: float = float("inf")   # Device.clock() by which it must complete (CommandTimeout)
    tid: int = 0
    flags: int = 0
    error: Exception | None = None   # no status: the link was lost in flight, or an NVMe status without one

    @property
    def ok(self) -> bool:
        return self.status == Status.SUCCESS

    def check(self) -> "Command":
        """Raise the status's :mod:`atomflash.errors` exception unless SUCCESS
        (:class:`~atomflash.errors.TransportError` if the link was lost first)."""
        if self.error is not None:
            raise self.error
        errors.check(self.status, self.detail)
        return self


@dataclass(frozen=True)
class OpenList:
    """What the device holds open (GET_LOG ``LogPage.OPEN``): every host's
    transactions and live appends, with what closes them."""

    transactions: tuple   # (tid, pages written, doomed) per open transaction
    appends: tuple        # (token, nlb) per live append

    @property
    def tids(self) -> list[int]:
        return [t for t, _, _ in self.transactions]

    @property
    def tokens(self) -> list[int]:
        return [t for t, _ in self.appends]


def _words(data: bytes) -> list[int]:
    data = bytes(data) + b"\0" * (-len(data) % 4)
    return list(memoryview(data).cast("I"))  # the SoC is little-endian, like this host


def _bytes(words: Sequence[int], n: int) -> bytes:
    import array

    return array.array("I", words).tobytes()[:n]


class Device:
    """One host queue pair of an atomflash device through ``transport``.

    ``qid``: the queue pair, 0 .. ``hostq.queues`` - 2 (the firmware keeps
    the last one for its console); a bad one is :class:`DeviceError` (out of
    range) or :class:`~atomflash.errors.InvalidArgument` (not a number).  The queue's rings and
    buffers live in slice ``qid`` of host memory (:func:`hostmem_slices`).
    ``timeout``: seconds each command may take, counted from its
    submission, before :class:`~atomflash.errors.CommandTimeout` (30 s: the
    simulated device's slowest commands take a few; ``submit(timeout=)`` per
    command), on ``clock`` (default the wall clock; :meth:`attach_sim` gives
    the simulator's CPU time, so a busy machine does not make a healthy
    simulated drive look hung).  ``ready_timeout``: wall seconds to wait for
    the host interface (the boot's recovery) before
    :class:`~atomflash.errors.ReadyTimeout`.  The
    constructor waits for the host interface (the firmware enables it after
    recovery), sets up the queue pair (resetting its indices) and reads
    IDENTIFY.  Several Devices may share one transport (one per queue pair;
    :meth:`open_queues`).

    Over NVMe: :meth:`attach_nvme` (one I/O queue of an
    :class:`atomflash.nvme.NvmeHost`) and :meth:`attach_nvme_all` (a
    :class:`DeviceSet` of them) give an :class:`NvmeDevice`, with the same
    verbs, return values, :class:`Command` objects and exceptions.
    """

    def __init__(self, transport, layout: Layout, *, qid: int = 0, queue_entries: int | None = None,
                 timeout: float = DEFAULT_TIMEOUT, ready_timeout: float = 600.0, clock=None):
        if isinstance(qid, bool) or not isinstance(qid, int) or qid < 0:
            raise InvalidArgument(f"qid {qid!r}: a host queue pair is a number from 0")
        if not timeout > 0:
            raise InvalidArgument(f"timeout {timeout!r}: seconds, more than 0")
        self.t = transport
        self.layout = layout
        if hasattr(transport, "pipeline"):   # host memory moves only at a doorbell: its accesses may pipeline
            transport.pipeline(layout.hostmem_base, layout.hostmem_size)
        self.qid = qid
        self.timeout = timeout
        self.clock = clock or time.monotonic
        self._cids = itertools.count(1)
        self._inflight: dict[int, Command] = {}
        self._shared = _shared(transport)
        self._closed = True  # until it is one of the transport's users
        if qid in self._shared.attached:
            raise DeviceError(f"queue pair {qid} already has a Device on this transport")
        self.counts = {"commands": 0, "pages_written": 0, "pages_read": 0}
        self._wait_ready(ready_timeout)
        self._setup_queue(queue_entries)
        self._attach()

    # -- construction -------------------------------------------------------
    @staticmethod
    def _sim_state(run_dir: Path | str) -> dict:
        import json

        try:
            return json.loads((Path(run_dir) / "sim.json").read_text())
        except FileNotFoundError:
            raise DeviceError(f"no simulation in {run_dir} (atomflash sim start)") from None

    @staticmethod
    def _sim_link(run_dir: Path | str, link_timeout: float = LINK_TIMEOUT, link: str = "debug"):
        """The simulation's ``link``: "debug" (UARTBone on TCP) or "etherbone" (UDP to its Ethernet gateway)."""
        from .transport import EtherboneTransport, UartBoneTransport

        state = Device._sim_state(run_dir)
        layout = Layout.from_csr_csv(state["csr_csv"])
        clock = _SimClock(state.get("vsim_pid"))
        if link == "etherbone":
            if not state.get("etherbone_port"):
                raise DeviceError(f"the simulation in {run_dir} has no Ethernet port (atomflash sim start --ethernet)")
            tries = max(1, round(link_timeout / ETHERBONE_TRY_SECONDS))
            transport = EtherboneTransport("127.0.0.1", state["etherbone_port"], bind_port=0,
                                           timeout=link_timeout / tries, retries=tries - 1)
            return transport, layout, clock
        return UartBoneTransport(state["port"], timeout=link_timeout), layout, clock

    @classmethod
    def attach_sim(cls, run_dir: Path | str, *, qid: int = 0, link_timeout: float = LINK_TIMEOUT,
                   port: str | None = None, **kw) -> "Device":
        """Queue ``qid`` of a simulation started by ``atomflash sim start`` (its
        ``sim.json``: the TCP ports, the build's ``csr.csv``).  ``port``: "nvme"
        (the drive as an NVMe device on its simulated PCIe link: I/O queue
        ``qid + 1``, see :meth:`attach_sim_nvme`), "debug" (host queue pair
        ``qid`` through the debug port, UARTBone) or "etherbone" (host queue
        pair ``qid`` over the Etherbone host link, a simulation started with
        ``etherbone``: UDP to its Ethernet gateway); None: NVMe when the
        simulation has a PCIe link, else the debug port.  The debug port takes
        one connection, so for several of its queues at once use
        :meth:`attach_sim_all`.  ``link_timeout``: seconds the link may stay
        silent (a stalled simulator) before :class:`~atomflash.errors.TransportError`."""
        if port not in (None, *SIM_LINKS):
            raise InvalidArgument(f"port {port!r}: one of {', '.join(SIM_LINKS)}")
        if port == "nvme" or (port is None and cls._sim_state(run_dir).get("pcie_port")):
            return cls.attach_sim_nvme(run_dir, qid=qid + 1, link_timeout=link_timeout, **kw)
        transport, layout, clock = cls._sim_link(run_dir, link_timeout, port or "debug")
        kw.setdefault("clock", clock)
        try:
            return cls(transport, layout, qid=qid, **kw)
        except BaseException:
            transport.close()
            raise

    @classmethod
    def attach_board(cls, csr_csv: Path | str, *, server: str = "127.0.0.1:1234", etherbone: str | None = None,
                     qid: int = 0, **kw) -> "Device":
        """Queue pair ``qid`` of a board (``make bitstream``, ``--core ftl``)
        behind ``litex_server`` at ``server`` (``host:port``; ``litex_server
        --uart --uart-port <tty>``, or ``--udp --udp-ip <board>`` for a board
        on Ethernet), or, with ``etherbone`` (``ip[:port]``), straight to a
        board's Etherbone host link over UDP.  ``csr_csv`` is the board build's
        ``csr.csv`` (``build/boards/<board>/csr.csv``), where the controller
        window and host memory are found.  See docs/results/boards.md,
        "Attaching a host"."""
        from .transport import EtherboneTransport, LitexServerTransport

        def split(text: str, what: str, default_port: int) -> tuple[str, int]:
            host, sep, port = text.rpartition(":")
            if not sep:
                host, port = text, str(default_port)
            if not port.isdigit() or not host:
                raise InvalidArgument(f"{what} {text!r}: host:port")
            return host, int(port)

        layout = Layout.from_csr_csv(csr_csv)
        if etherbone is not None:
            host, port = split(etherbone, "etherbone", spec.ETHERBONE.udp_port)
            # a board answers to Etherbone's port; the simulated gateway (on the loopback, where its
            # own socket holds that port) answers whoever asked
            transport = EtherboneTransport(host, port, bind_port=0 if _loopback(host) else None)
        else:
            host, port = split(server, "server", 1234)
            transport = LitexServerTransport(port, host)
        try:
            return cls(transport, layout, qid=qid, **kw)
        except BaseException:
            transport.close()
            raise

    @classmethod
    def attach_sim_all(cls, run_dir: Path | str, *, queues: int | Iterable[int] | None = None,
                       link_timeout: float = LINK_TIMEOUT, port: str | None = None, **kw) -> "DeviceSet":
        """Several queues of a simulation on its one connection: ``queues``
        None for every queue, N for the first N, or the qids (0-based, as
        :meth:`attach_sim` counts them).  ``port`` as :meth:`attach_sim`: over
        NVMe, one host and a Device per I/O queue (:meth:`attach_nvme_all`); over
        the debug port, its host queue pairs (:meth:`open_queues`)."""
        if port not in (None, "nvme", "debug"):
            raise InvalidArgument(f"port {port!r}: 'nvme' or 'debug'")
        if port == "nvme" or (port is None and cls._sim_state(run_dir).get("pcie_port")):
            if isinstance(queues, int) and not isinstance(queues, bool):
                qids = list(range(1, queues + 1))
            else:
                qids = None if queues is None else [q + 1 for q in queues]
            first = cls.attach_sim_nvme(run_dir, qid=qids[0] if qids else 1, link_timeout=link_timeout,
                                        io_queues=max(qids) if qids else None, **kw)
            out = DeviceSet([first])
            try:
                for q in (qids or first.host.io_queues)[1:]:
                    out.append(NvmeDevice(first.host, qid=q, **kw))
            except BaseException:
                out.close()
                raise
            return out
        transport, layout, clock = cls._sim_link(run_dir, link_timeout)
        kw.setdefault("clock", clock)
        try:
            return cls.open_queues(transport, layout, queues, **kw)
        except BaseException:
            transport.close()
            raise

    @classmethod
    def attach_sim_nvme(cls, run_dir: Path | str, *, qid: int = 1, link_timeout: float = LINK_TIMEOUT,
                        io_queues: int | None = None, ready_timeout: float = 600.0, **kw) -> "NvmeDevice":
        """I/O queue ``qid`` of a simulation started with the drive as an NVMe device (``atomflash sim
        start --nvme``): the host library is the root complex of its simulated PCIe link
        (:class:`atomflash.pcie_link.SimPcieLink`, host memory in this process), brings the controller up
        (:meth:`atomflash.nvme.NvmeHost.initialize`, which resets it) and attaches to the queue.  One host
        at a time: the link takes one connection; further queues of the same host with
        :meth:`attach_nvme` on ``device.host`` (``io_queues``: how many the host creates, by default
        ``qid`` and at least two).  ``ready_timeout``: wall seconds the bring-up may wait for the controller
        (CSTS.RDY, each admin command), as :class:`Device` waits for a drive over the debug port: a
        simulated boot that recovers after a power cut takes long in wall time on a loaded machine."""
        from .hostmem import HostMemory
        from .nvme import NvmeHost
        from .pcie_link import SimPcieLink

        state = cls._sim_state(run_dir)
        if not state.get("pcie_port"):
            raise DeviceError(f"the simulation in {run_dir} has no PCIe link (atomflash sim start --nvme)")
        memory = HostMemory()
        link = SimPcieLink(state["pcie_port"], memory, timeout=link_timeout)
        try:
            host = NvmeHost(link, memory, io_queues=io_queues or max(qid, 2), timeout=ready_timeout).initialize()
            kw.setdefault("clock", _SimClock(state.get("vsim_pid")))
            dev = NvmeDevice(host, qid=qid, **kw)
            dev._shared.link = link
            return dev
        except BaseException:
            link.close()
            raise

    @classmethod
    def attach_nvme(cls, host, qid: int = 1, **kw) -> "NvmeDevice":
        """I/O queue ``qid`` of an NVMe drive that ``host`` (an :class:`atomflash.nvme.NvmeHost`,
        initialized here if it was not) drives: an :class:`NvmeDevice`.  ``kw``: ``timeout``, ``clock``."""
        return NvmeDevice(host, qid=qid, **kw)

    @classmethod
    def attach_nvme_all(cls, host, queues: int | Iterable[int] | None = None, **kw) -> "DeviceSet":
        """One :class:`NvmeDevice` per I/O queue of ``host``: ``queues`` None for every I/O queue the
        host created, N for the first N, or the qids."""
        if host.controller is None:
            host.initialize()
        if queues is None:
            qids = host.io_queues
        elif isinstance(queues, int) and not isinstance(queues, bool):
            if not 1 <= queues <= len(host.io_queues):
                raise BadQueue(f"{queues} I/O queues asked for, the host has {len(host.io_queues)}")
            qids = host.io_queues[:queues]
        else:
            qids = list(queues)
            if not qids or len(set(qids)) != len(qids):
                raise InvalidArgument(f"queues {qids}: at least one, each at most once")
        out = DeviceSet()
        try:
            for q in qids:
                out.append(NvmeDevice(host, qid=q, **kw))
        except BaseException:
            out.close()
            raise
        return out

    @classmethod
    def open_queues(cls, transport, layout: Layout, queues: int | Iterable[int] | None = None,
                    **kw) -> "DeviceSet":
        """One Device per host queue pair, all on ``transport``: ``queues``
        None for every host queue the device has, N for pairs 0 .. N-1, or an
        iterable of qids.  ``kw`` goes to each :class:`Device`.  Returns a
        :class:`DeviceSet` (a list; ``close()`` closes them all)."""
        if queues is None or isinstance(queues, int):
            if isinstance(queues, int) and not isinstance(queues, bool) and queues < 1:
                raise InvalidArgument(f"queues {queues}: at least 1")
            first = cls(transport, layout, qid=0, **kw)
            n = first.host_queues if queues is None else queues
            if n > first.host_queues:
                first._release_queue()   # the transport is the caller's
                raise BadQueue(f"{n} host queues asked for, the device has {first.host_queues}")
            qids = range(1, n)
            out = DeviceSet([first])
        else:
            qids = list(queues)
            if not qids:
                raise InvalidArgument("no queue pair asked for")
            if len(set(qids)) != len(qids):
                raise InvalidArgument(f"queue pairs {qids}: each at most once")
            out = DeviceSet()
        try:
            for q in qids:
                out.append(cls(transport, layout, qid=q, **kw))
        except BaseException:
            for d in out:
                d._release_queue()
            raise
        return out

    def _attach(self) -> None:
        """One of the link's users, on queue ``qid``, once IDENTIFY has answered (``info``, ``lba_size``,
        ``capacity``); a failed IDENTIFY gives the queue back."""
        self._shared.users += 1
        self._shared.attached[self.qid] = self
        self._closed = False
        try:
            self.info = self.identify()
        except BaseException:
            self._release_queue()
            raise
        self.lba_size = self.info.lba_size
        self.capacity = self.info.capacity

    def _release_queue(self) -> None:
        """No longer one of the transport's users (without closing it)."""
        if not self._closed:
            self._closed = True
            sh = self._shared
            if sh.attached.get(self.qid) is self:
                del sh.attached[self.qid]
            sh.users -= 1

    def close(self) -> None:
        """Done with this queue pair; the last Device on the transport closes it."""
        if self._closed:
            return
        self._release_queue()
        if self._shared.users <= 0:
            self.t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- registers ----------------------------------------------------------
    def _reg(self, name: str, q: int | None = None) -> int:
        r = HQ[name]
        return self.layout.ctrl_base + r.offset + (r.stride * q if q is not None else 0)

    def rd(self, name: str, q: int | None = None) -> int:
        return self._link(self.t.read, self._reg(name, q), 1)[0]

    def wr(self, name: str, value: int, q: int | None = None) -> None:
        self._link(self.t.write, self._reg(name, q), [value])

    # -- the link ---------------------------------------------------------------
    def _link(self, fn, *args):
        """A transport call; a link failure makes every Device on it unusable (:meth:`_lose`)."""
        lost = self._shared.lost
        if lost is not None:
            raise TransportError(f"the device link was lost earlier ({lost})")
        try:
            return fn(*args)
        except TransportError as e:
            self._lose(e)
            raise

    def _lose(self, err: TransportError) -> None:
        """The link failed: every command in flight on this transport fails with ``err`` and gives
        back its host memory (the queue pairs must be set up again on a new link)."""
        sh = self._shared
        if sh.lost is None:
            sh.lost = err
        for d in list(sh.attached.values()) or [self]:
            for cmd in d._inflight.values():
                d.mem.release(cmd.buf, cmd.buf_bytes)
                cmd.error, cmd.done = err, True
            d._inflight.clear()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.rd("id") != spec.HOST_REGS_ID:  # reads 0 until the firmware enables the host interface
            if time.monotonic() > deadline:
                raise ReadyTimeout(f"the host interface did not come up within {timeout:.0f} s (recovery?)")
            time.sleep(0.05)
        if self.rd("version") != spec.SPEC_VERSION:
            raise DeviceError(f"device implements spec {self.rd('version')}, this library {spec.SPEC_VERSION}")

    def _setup_queue(self, entries: int | None) -> None:
        queues, max_entries = self.rd("queues"), self.rd("max_entries")
        self.queue_pairs = queues
        self.host_queues = queues - 1
        if self.qid >= self.host_queues:
            hosts = (f"0 .. {self.host_queues - 1} are the host's" if self.host_queues > 1
                     else "0 is the host's" if self.host_queues == 1 else "none is the host's")
            raise BadQueue(f"queue pair {self.qid} is not a host queue: the device has {queues} queue pairs, "
                              f"{hosts}, {queues - 1} is the firmware's")
        n = entries or max_entries
        if n > max_entries or n < 2 or n & (n - 1):
            raise InvalidArgument(f"queue entries {n}: a power of two in 2..{max_entries}")
        self.qsize = n
        base, size = hostmem_slices(self.layout, self.host_queues)[self.qid]
        self.mem_base, self.mem_size = base, size
        self.sq = base
        self.cq = base + n * spec.CMD.size
        data = self.cq + -(-n * spec.CPL.size // 64) * 64
        if data >= base + size:
            raise DeviceError(f"queue pair {self.qid}: {n}-entry rings do not fit its {size}-byte slice of host memory")
        self.mem = _Allocator(data, base + size - data)
        self.heap_bytes = base + size - data
        self._link(self.t.write, self.cq, [0] * (n * spec.CPL.size // 4))  # phase 0 everywhere: nothing posted
        self.wr("sq_base", self.sq, self.qid)
        self.wr("cq_base", self.cq, self.qid)
        self.wr("size", n, self.qid)  # resets the pair's indices and phase
        if self.rd("status") & CONFIG_ERROR:
            raise DeviceError("the device refused the queue setup (config_error)")
        self.sq_tail = self.cq_head = 0
        self.phase = 1

    # -- submission / completion ---------------------------------------------
    def submit(self, opcode: Opcode, *, payload: bytes = b"", read_bytes: int = 0, list_entries: bytes = b"",
               list_data: Sequence[bytes] = (), detail: str = "", timeout: float | None = None,
               **fields) -> Command:
        """Queue one command.  ``payload``: data for ``buf`` (writes);
        ``read_bytes``: bytes ``buf`` receives (reads); ``list_entries``
        (built by the caller with ``buf`` fields filled by ``list_data``
        addresses, see :meth:`submit_atomic_write`).  ``timeout``: seconds
        of ``self.clock`` it may take (default ``self.timeout``).  Returns at once.

        A field value the command cannot carry raises the status the device
        gives that mistake (``errors.LbaOutOfRange`` for LBA -1, ...) before
        anything is taken; whatever else fails before the command reaches
        the device gives its host memory back."""
        try:
            opcode = Opcode(opcode)
        except ValueError:
            raise InvalidArgument(f"{detail or 'submit'}: opcode {opcode!r} is not an Opcode") from None
        timeout = self.timeout if timeout is None else timeout
        if not timeout > 0:
            raise InvalidArgument(f"timeout {timeout!r}: seconds, more than 0")
        self._check_fields(opcode, fields, detail)
        if self._shared.lost is not None:
            raise TransportError(f"the device link was lost earlier ({self._shared.lost})")
        while len(self._inflight) >= self.qsize - 1:
            self.poll(block=True)
        cmd = self._send(opcode, fields, payload=payload, read_bytes=read_bytes, list_entries=list_entries,
                         list_data=list_data, detail=detail, timeout=timeout)
        self.counts["commands"] += 1
        if opcode == Opcode.TX_WRITE:
            self.open_tids.add(cmd.tid)
        return cmd

    def _start(self, cmd: Command, timeout: float) -> None:
        """``cmd`` is in flight from now, due within ``timeout`` seconds of ``self.clock``."""
        cmd.submitted = self.clock()
        cmd.deadline = cmd.submitted + timeout
        self._inflight[cmd.cid] = cmd

    def _send(self, opcode: Opcode, fields: dict, *, payload: bytes, read_bytes: int, list_entries: bytes,
              list_data: Sequence[bytes], detail: str, timeout: float) -> Command:
        """Hand one checked command to the device (here: buffers in this queue's slice of host memory,
        the ``spec.CMD`` entry, the tail doorbell) and :meth:`_start` it."""
        need = max(len(payload), read_bytes) + sum(-(-len(d) // 64) * 64 for d in list_data) + len(list_entries)
        buf = self._alloc(need)
        try:
            cmd = Command(self._next_cid(), opcode, detail, buf=buf, buf_bytes=need,
                          tid=fields.get("tid", 0), flags=fields.get("flags", 0))
            addr = buf
            if payload or read_bytes:
                fields["buf"] = addr
                if payload:
                    self._link(self.t.write, addr, _words(payload))
                cmd.read_addr, cmd.read_bytes = addr, read_bytes
                addr += -(-max(len(payload), read_bytes) // 64) * 64
            if list_data:
                entries = bytearray(list_entries)
                for i, d in enumerate(list_data):  # ATOMIC_ENTRY.buf of member i
                    self._link(self.t.write, addr, _words(d))
                    off = i * spec.ATOMIC_ENTRY.size + spec.ATOMIC_ENTRY["buf"].offset
                    entries[off:off + 8] = addr.to_bytes(8, "little")
                    addr += -(-len(d) // 64) * 64
                list_entries = bytes(entries)
            if list_entries:
                fields["list"] = addr
                self._link(self.t.write, addr, _words(list_entries))
            entry = spec.CMD.pack(opcode=int(opcode), cid=cmd.cid, nsid=1, **fields)
            self._link(self.t.write, self.sq + self.sq_tail * spec.CMD.size, _words(entry))
        except BaseException:
            self.mem.release(buf, need)     # not in flight yet: nobody else gives it back
            raise
        self.sq_tail = (self.sq_tail + 1) % self.qsize
        self._start(cmd, timeout)
        self.wr("sq_tail", self.sq_tail, self.qid)   # a lost link here fails it with the rest (_lose)
        return cmd

    def _check_fields(self, opcode: Opcode, fields: dict, detail: str) -> None:
        """Every field value fits the command, else the status the device gives that mistake
        (INVALID_FIELD for a field without one of its own), raised before the command takes anything."""
        for name, value in fields.items():
            try:
                f = spec.CMD[name]
            except KeyError:
                raise InvalidArgument(f"{detail or opcode.name}: a command has no field {name!r}") from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidArgument(f"{detail or opcode.name}: {name} {value!r} is not an integer")
            if not 0 <= value < 1 << 8 * f.size:
                status = _FIELD_STATUS.get(name, Status.INVALID_FIELD)
                raise errors.error_class(status)(f"{detail or opcode.name}: {name} {value} does not fit the "
                                                 f"command's {8 * f.size}-bit field; refused by the host, not sent",
                                                 submitted=False)

    def _next_cid(self) -> int:
        while True:
            cid = next(self._cids) & 0xFFFF
            if cid and cid not in self._inflight:
                return cid

    def _alloc(self, n: int) -> int:
        while True:
            addr = self.mem.alloc(n)
            if addr is not None:
                return addr
            if not any(not c.done for c in self._inflight.values()):
                raise HostMemoryFull(f"{n} bytes of buffers do not fit queue pair {self.qid}'s {self.heap_bytes}-byte "
                                     f"share of host memory")
            self.poll(block=True)

    def poll(self, block: bool = False) -> list[Command]:
        """Collect posted completions (``block``: wait for at least one, while
        anything is in flight)."""
        return Device.poll_any([self], block=block)

    @staticmethod
    def poll_any(devs: Sequence["Device"], *, block: bool = False) -> list[Command]:
        """Collect the posted completions of every Device in ``devs`` (their
        ``cq_tail`` registers read in one burst when they share a transport).
        ``block``: wait until at least one completes, while any has a command
        in flight (:class:`~atomflash.errors.CommandTimeout` once a command in flight is past its
        deadline)."""
        devs = list(devs)
        if not devs:
            return []
        kinds: dict = {}   # Devices by the way they reach their device (debug port, NVMe)
        for d in devs:
            kinds.setdefault(type(d)._reap.__func__, []).append(d)
        while True:
            done = [c for group in kinds.values() for c in type(group[0])._reap(group)]
            if done:
                return done
            if not block or not any(d._inflight for d in devs):
                return []
            Device._check_deadlines(devs)
            for group in kinds.values():
                type(group[0])._idle(group)

    @classmethod
    def _reap(cls, devs: Sequence["Device"]) -> list[Command]:
        """The completions posted to ``devs``' queues, without waiting."""
        ready = [(d, t) for d, t in zip(devs, cls._cq_tails(devs)) if t != d.cq_head]
        return [c for d, t in ready for c in d._collect(t)]

    @staticmethod
    def _idle(devs: Sequence["Device"]) -> None:
        """Between two polls that found nothing."""
        time.sleep(0.002)

    @staticmethod
    def _check_deadlines(devs: Sequence["Device"]) -> None:
        """CommandTimeout for the oldest command in flight past its deadline (it stays in flight)."""
        late = [(c.deadline, d, c) for d in devs for now in (d.clock(),) for c in d._inflight.values()
                if c.deadline < now]
        if late:
            _, d, c = min(late, key=lambda x: x[0])
            raise CommandTimeout(f"{c.detail or c.opcode.name} (cid {c.cid}, queue {d.qid}) did not complete within "
                                 f"{c.deadline - c.submitted:.0f} s: the drive is hung or lost "
                                 f"({len(d._inflight)} command(s) in flight on queue {d.qid})", c)

    @staticmethod
    def _cq_tails(devs: Sequence["Device"]) -> list[int]:
        t, base = devs[0].t, devs[0].layout.ctrl_base
        if len(devs) == 1 or any(d.t is not t or d.layout.ctrl_base != base for d in devs):
            return [d.rd("cq_tail", d.qid) for d in devs]
        r = HQ["cq_tail"]
        lo, hi = min(d.qid for d in devs), max(d.qid for d in devs)
        words = devs[0]._link(t.read, devs[0]._reg("cq_tail", lo), (hi - lo) * r.stride // 4 + 1)
        return [words[(d.qid - lo) * r.stride // 4] for d in devs]

    def _collect(self, tail: int) -> list[Command]:
        """The completions posted up to CQ index ``tail``."""
        n = (tail - self.cq_head) % self.qsize
        if not n:
            return []
        first = self.cq_head
        run1 = min(n, self.qsize - first)
        words = self._link(self.t.read, self.cq + first * spec.CPL.size, run1 * 4)
        if n > run1:
            words += self._link(self.t.read, self.cq, (n - run1) * 4)
        out = []
        raw = _bytes(words, n * spec.CPL.size)
        for i in range(n):
            c = spec.CPL.unpack(raw[i * 16:(i + 1) * 16])
            sf = c.sf
            if sf & 1 != self.phase:
                raise DeviceError(f"queue {self.qid}: completion slot {self.cq_head} has phase {sf & 1}, "
                                  f"expected {self.phase}")
            if c.sqid != self.qid:
                raise DeviceError(f"queue {self.qid}: completion for queue {c.sqid} (cid {c.cid})")
            self.cq_head = (self.cq_head + 1) % self.qsize
            if self.cq_head == 0:
                self.phase ^= 1
            cmd = self._inflight.pop(c.cid, None)
            if cmd is None:
                raise DeviceError(f"queue {self.qid}: completion for cid {c.cid}, which is not in flight")
            try:
                cmd.status = Status(sf >> 1)
            except ValueError:
                cmd.status = Status.INTERNAL_ERROR   # a code this library does not know
                cmd.detail += f" (the device answered status 0x{sf >> 1:02x}, unknown to this library)"
            cmd.result = c.result
            try:
                if cmd.read_bytes and cmd.status == Status.SUCCESS:
                    cmd.data = _bytes(self._link(self.t.read, cmd.read_addr, -(-cmd.read_bytes // 4)),
                                      cmd.read_bytes)
            finally:
                self.mem.release(cmd.buf, cmd.buf_bytes)
                cmd.done = True
                if self._shared.lost is None:
                    self._track(cmd)
                else:
                    cmd.error = self._shared.lost
            out.append(cmd)
        self.wr("cq_head", self.cq_head, self.qid)
        return out

    def _track(self, cmd: Command) -> None:
        """The transactions this host has open, from a completed command (submitted or blocking alike):
        a commit or abort ends its tid whatever the status, and so does a successful final write;
        a write that had to open its tid (``tx_new``) and was refused did not open it (one whose
        pages failed, MEDIA_ERROR and the like, may have: its transaction stays to be aborted)."""
        if not cmd.tid:
            return
        if cmd.opcode in (Opcode.TX_COMMIT, Opcode.TX_ABORT):
            self.open_tids.discard(cmd.tid)
        elif cmd.opcode == Opcode.TX_WRITE:
            if cmd.status == Status.SUCCESS:
                if cmd.flags & TX_FINAL:
                    self.open_tids.discard(cmd.tid)
            elif cmd.flags & TX_NEW and cmd.status not in _MAY_HAVE_OPENED:
                self.open_tids.discard(cmd.tid)

    def wait(self, cmd: Command, *, check: bool = True, timeout: float | None = None) -> Command:
        """Until ``cmd`` completes; raises its status's exception when ``check``
        (:class:`~atomflash.errors.CommandTimeout` when it, or another command, is overdue).
        ``timeout``: give ``cmd`` that many more seconds from now (e.g. to keep waiting for one
        that timed out)."""
        if not cmd.done and self._inflight.get(cmd.cid) is not cmd:
            raise DeviceError(f"{cmd.detail or cmd.opcode.name}: not in flight on queue {self.qid}")
        if timeout is not None and not cmd.done:
            cmd.deadline = self.clock() + timeout
        while not cmd.done:
            self.poll(block=True)
        return cmd.check() if check else cmd

    def wait_all(self, *, check: bool = True) -> None:
        while self._inflight:
            for c in self.poll(block=True):
                if check:
                    c.check()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # -- checks the library makes before the device does ----------------------
    def _blocks(self, data: bytes) -> int:
        if not data or len(data) % self.lba_size:
            raise InvalidArgument(f"data must be a whole number of {self.lba_size}-byte blocks, got {len(data)} bytes")
        return len(data) // self.lba_size

    @staticmethod
    def _entry(record, what: str, **fields) -> bytes:
        """One list entry; a value that does not fit: the status the device gives it, unsent."""
        try:
            return record.pack(**fields)
        except SpecError:
            pass
        for name, value in fields.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidArgument(f"{what}: {name} {value!r} is not an integer")
            if not 0 <= value < 1 << 8 * record[name].size:
                status = {"nlb": Status.REMAP_LENGTH}.get(name, _FIELD_STATUS.get(name, Status.INVALID_FIELD))
                raise errors.error_class(status)(f"{what}: entry {name} {value} does not fit its "
                                                 f"{8 * record[name].size}-bit field; refused by the host, not sent",
                                                 submitted=False)
        raise InvalidArgument(f"{what}: entry {fields} does not fit {record.name}")

    # -- verbs: submit_* returns a Command, the plain name waits and checks ----------
    def identify(self):
        """The IDENTIFY record (``spec.IDENTIFY``) as a dict with attribute access."""
        c = self.wait(self.submit(Opcode.IDENTIFY, read_bytes=spec.IDENTIFY.size, detail="identify"))
        return spec.IDENTIFY.unpack(c.data)

    def stats(self, *, fresh: bool = False, timeout: float = 60.0):
        """The GET_LOG page (``spec.LOG_PAGE``) as a dict, plus this host's counts.

        The firmware refreshes the page from its idle loop, every 20,000 cycles at most, so a page read
        just after a command may not count it yet.  ``fresh``: wait for a refresh after this call
        (``uptime_cycles`` moves; the core serves the newest refresh, so a later one came after every
        command completed before the call)."""

        def page():
            c = self.wait(self.submit(Opcode.GET_LOG, read_bytes=spec.LOG_PAGE.size, detail="get log"))
            return {k: v for k, v in spec.LOG_PAGE.unpack(c.data).items() if not k.startswith("rsvd")}

        p = page()
        if fresh:
            stale, deadline = p["uptime_cycles"], time.monotonic() + timeout
            while p["uptime_cycles"] == stale:
                if time.monotonic() > deadline:
                    raise DeviceError(f"the GET_LOG page was not refreshed within {timeout:.0f} s "
                                      "(is the firmware's idle loop running?)")
                time.sleep(0.02)
                p = page()
        return p

    def open_list(self) -> OpenList:
        """What the device holds open now (GET_LOG ``LogPage.OPEN``, written by the core from its own
        tables in command order): every open transaction (tid, pages, doomed) and live append (token,
        blocks) this queue pair owns -- what a host restarted after a crash must commit, abort, remap
        or release (the firmware's pair, and NVMe's admin queue, see every queue's).  IDENTIFY's
        max_open_tx and max_appends size the page."""
        info = self.info
        size = spec.OPEN_TX.size * info.max_open_tx + spec.OPEN_APPEND.size * info.max_appends
        c = self.wait(self.submit(Opcode.GET_LOG, log_page=int(LogPage.OPEN), read_bytes=size, detail="get log open"))
        txs, apps = [], []
        for i in range(info.max_open_tx):
            e = spec.OPEN_TX.unpack(c.data[i * spec.OPEN_TX.size:(i + 1) * spec.OPEN_TX.size])
            if e.tid:
                txs.append((e.tid, e.pages, bool(spec.OPEN_TX.decompose("flags", e.flags).doomed)))
        base = spec.OPEN_TX.size * info.max_open_tx
        for i in range(info.max_appends):
            e = spec.OPEN_APPEND.unpack(c.data[base + i * spec.OPEN_APPEND.size:base + (i + 1) * spec.OPEN_APPEND.size])
            if e.token:
                apps.append((e.token, e.nlb))
        return OpenList(tuple(sorted(txs)), tuple(apps))

    def submit_read(self, lba: int, nlb: int = 1, *, tid: int = 0) -> Command:
        op = Opcode.TX_READ if tid else Opcode.READ
        return self.submit(op, lba=lba, nlb=nlb, tid=tid, read_bytes=nlb * self.lba_size,
                           detail=f"{op.name.lower()} lba {lba} x {nlb}" + (f" tid {tid}" if tid else ""))

    def read(self, lba: int, nlb: int = 1) -> bytes:
        data = self.wait(self.submit_read(lba, nlb)).data
        self.counts["pages_read"] += nlb
        return data

    def submit_write(self, lba: int, data: bytes, *, fua: bool = False) -> Command:
        n = self._blocks(data)
        self.counts["pages_written"] += n
        return self.submit(Opcode.WRITE, lba=lba, nlb=n, flags=FUA if fua else 0, payload=data,
                           detail=f"write lba {lba} x {n}")

    def write(self, lba: int, data: bytes, *, fua: bool = False) -> None:
        self.wait(self.submit_write(lba, data, fua=fua))

    def submit_trim(self, lba: int, nlb: int = 1) -> Command:
        return self.submit(Opcode.DEALLOCATE, lba=lba, nlb=nlb, detail=f"trim lba {lba} x {nlb}")

    def trim(self, lba: int, nlb: int = 1) -> None:
        self.wait(self.submit_trim(lba, nlb))

    def submit_flush(self) -> Command:
        return self.submit(Opcode.FLUSH, detail="flush")

    def flush(self) -> None:
        self.wait(self.submit_flush())

    def hint(self, hint: Hint | int) -> None:
        self.wait(self.submit(Opcode.HINT, hint=int(hint), detail=f"hint {int(hint)}"))

    def submit_atomic_write(self, entries: Iterable[tuple[int, bytes]]) -> Command:
        entries = list(entries)
        for _, d in entries:
            if len(d) != self.lba_size:
                raise InvalidArgument(f"atomic members are one {self.lba_size}-byte block each, got {len(d)} bytes")
        lst = b"".join(self._entry(spec.ATOMIC_ENTRY, "atomic write", lba=lba, buf=0) for lba, _ in entries)
        self.counts["pages_written"] += len(entries)
        return self.submit(Opcode.ATOMIC_WRITE, nlist=len(entries), list_entries=lst,
                           list_data=[d for _, d in entries],
                           detail=f"atomic write of {len(entries)} blocks")

    def atomic_write(self, entries: Iterable[tuple[int, bytes]]) -> None:
        """Write every (lba, block) pair as one all-or-nothing group."""
        self.wait(self.submit_atomic_write(entries))

    # transactions (ids are device-wide: shared by the Devices on one transport)
    @property
    def open_tids(self) -> set[int]:
        """Transactions this host opened and has not seen end (every queue on this transport; the
        submit_* forms count as the blocking ones do).  What the whole device holds open, whoever
        opened it: :meth:`open_list`."""
        return self._shared.open_tids

    def new_tid(self) -> int:
        """A random nonzero 32-bit transaction id this host does not have open.  Another host on the
        same queue may draw the same one (once in 2**32): open it with ``tx_new`` (:meth:`transaction`
        does) and the device refuses a tid the queue has open with TID_IN_USE instead of sharing it."""
        while True:
            tid = self._shared.tids.getrandbits(32)
            if tid and tid not in self.open_tids:
                return tid

    def submit_tx_write(self, tid: int, lba: int, data: bytes, *, final: bool = False, new: bool = False) -> Command:
        """TX_WRITE; ``new``: this write opens ``tid`` (TID_IN_USE, nothing changed, if this queue has it
        open)."""
        n = self._blocks(data)
        self.counts["pages_written"] += n
        return self.submit(Opcode.TX_WRITE, tid=tid, lba=lba, nlb=n,
                           flags=(TX_FINAL if final else 0) | (TX_NEW if new else 0), payload=data,
                           detail=f"tx write tid {tid} lba {lba} x {n}" + (" (final)" if final else "")
                           + (" (new)" if new else ""))

    def tx_write(self, tid: int, lba: int, data: bytes, *, final: bool = False, new: bool = False) -> None:
        self.wait(self.submit_tx_write(tid, lba, data, final=final, new=new))

    def tx_read(self, tid: int, lba: int, nlb: int = 1) -> bytes:
        return self.wait(self.submit_read(lba, nlb, tid=tid)).data

    def submit_tx_commit(self, tid: int) -> Command:
        return self.submit(Opcode.TX_COMMIT, tid=tid, detail=f"tx commit tid {tid}")

    def submit_tx_abort(self, tid: int) -> Command:
        return self.submit(Opcode.TX_ABORT, tid=tid, detail=f"tx abort tid {tid}")

    def tx_commit(self, tid: int) -> None:
        self.wait(self.submit_tx_commit(tid))

    def tx_abort(self, tid: int) -> None:
        self.wait(self.submit_tx_abort(tid))

    def transaction(self, tid: int | None = None) -> "Transaction":
        """``with dev.transaction() as tx:`` -- commits when the block ends,
        aborts when it raises.  Its first write opens the tid with ``tx_new``:
        an id of the caller's that is open already raises ``errors.TidInUse``;
        one drawn here (``tid`` None) is drawn again."""
        return Transaction(self, tid, chosen=tid is None)

    # append / remap
    def submit_append(self, data: bytes, *, fua: bool = False) -> Command:
        n = self._blocks(data)
        self.counts["pages_written"] += n
        return self.submit(Opcode.APPEND, nlb=n, flags=FUA if fua else 0, payload=data, detail=f"append x {n}")

    def append(self, data: bytes, *, fua: bool = False) -> int:
        """Stage ``data`` bound to no LBA; returns its 8-byte token (an int)."""
        return self.wait(self.submit_append(data, fua=fua)).result

    def submit_remap(self, triples: Iterable[tuple[int, int, int]]) -> Command:
        triples = list(triples)
        lst = b"".join(self._entry(spec.REMAP_ENTRY, "remap", lba=lba, token=token, nlb=nlb)
                       for lba, token, nlb in triples)
        return self.submit(Opcode.REMAP, nlist=len(triples), list_entries=lst,
                           detail=f"remap of {len(triples)} triples")

    def remap(self, triples: Iterable[tuple[int, int, int]]) -> None:
        """Bind every (lba, token, nlb) at once (the tokens are spent)."""
        self.wait(self.submit_remap(triples))

    def submit_release(self, token: int) -> Command:
        return self.submit(Opcode.RELEASE, token=token, detail=f"release token 0x{token:016x}")

    def release(self, token: int) -> None:
        self.wait(self.submit_release(token))

    def scsi(self, cdb: bytes, data: bytes = b"") -> bytes:
        """Execute one of the append/remap paper's SCSI commands (APPEND
        ATOMIC 3Dh: ``data`` is the blocks, returns the 8-byte ROD token;
        REMAP 49h: ``data`` is the parameter list, returns b"")."""
        from . import scsi

        op, args = scsi.to_command(cdb, data if cdb[:1] == bytes([scsi.REMAP]) else b"")
        if op == Opcode.APPEND:
            if len(data) != args["nlb"] * self.lba_size:
                raise scsi.CdbError(f"transfer length {args['nlb']} blocks, {len(data)} bytes of data")
            return scsi.encode_token(self.append(data, fua=args["fua"]))
        self.remap([(e["lba"], e["token"], e["nlb"]) for e in args["entries"]])
        return b""


# the verbs whose nlb IDENTIFY's max_transfer bounds
_SIZED = {Opcode.READ, Opcode.TX_READ, Opcode.WRITE, Opcode.TX_WRITE, Opcode.APPEND}
_NVME_MAX_COUNT = 1 << 16   # NVMe carries a block or entry count 0-based in 16 bits


class NvmeDevice(Device):
    """A :class:`Device` on one I/O queue of an NVMe drive (:meth:`Device.attach_nvme`).

    ``host`` (:class:`atomflash.nvme.NvmeHost`) owns the controller, the admin queue and host memory;
    this Device owns I/O queue ``qid`` (nothing else may submit there: it takes every completion the
    queue posts).  It has every verb, return value and :class:`Command` a Device has over the debug
    port, and raises the same exceptions for the same statuses: the completion's NVMe status maps back
    to the atomflash Status (``spec.atomflash_status_of``), then to that status's
    :mod:`atomflash.errors` class.  Where NVMe cannot say what the debug port says:

    * an NVMe status with no atomflash counterpart (queue deletion, abort, an invalid namespace ...)
      raises :class:`atomflash.nvme.NvmeError` (``sct``, ``sc``); the Command's ``status`` is None and
      its ``error`` that exception;
    * NVMe reports ZERO_LENGTH and TRANSFER_TOO_LARGE as Invalid Field: a count of 0, or beyond
      16 bits, cannot be encoded and is refused unsent (``ZeroLength``, ``TransferTooLarge``,
      ``ListTooLong``, with ``submitted`` False); an Invalid Field for a READ, WRITE, TX_READ,
      TX_WRITE or APPEND of more than IDENTIFY's max_transfer blocks raises ``TransferTooLarge``,
      for a REMAP with a triple of 0 blocks ``ZeroLength``;
    * :meth:`identify` comes from Identify Controller (atomflash's limits from byte 3072; max_transfer
      is AWUN + 1, volatile_cache 1 when VWC says there is a cache) and Identify Namespace (capacity,
      block size), with ``queue_depth`` this queue's entries; what NVMe does not report (firmware
      version, NAND geometry, ECC) reads 0;
    * :meth:`stats` and :meth:`open_list` read log pages C0h and C1h through the admin queue; they,
      and IDENTIFY, complete when submitted and are collected by the next poll like any command.

    Devices on one host share its transaction ids (:meth:`Device.new_tid`).  :meth:`close` gives the
    queue back to the host without shutting the controller down (``host.shutdown()`` does).
    """

    def __init__(self, host, *, qid: int = 1, timeout: float = DEFAULT_TIMEOUT, clock=None):
        if isinstance(qid, bool) or not isinstance(qid, int) or qid < 1:
            raise InvalidArgument(f"qid {qid!r}: an NVMe I/O queue is a number from 1")
        if not timeout > 0:
            raise InvalidArgument(f"timeout {timeout!r}: seconds, more than 0")
        if host.controller is None:
            host.initialize()
        if qid not in host.io_queues:
            raise BadQueue(f"I/O queue {qid} is not one the host created ({host.io_queues})")
        self.host = host
        self.qid = qid
        self.timeout = timeout
        self.clock = clock or time.monotonic
        self._inflight: dict[int, Command] = {}
        self._answered: dict[int, tuple] = {}        # cid -> outcome of a command answered at submission
        self._admin_cids = itertools.count(_NVME_MAX_COUNT)   # beyond every NVMe cid
        self._invalid_field: dict[int, Status] = {}  # cid -> the status an Invalid Field answer stands for
        self._shared = _shared(host)
        self._closed = True
        if qid in self._shared.attached:
            raise DeviceError(f"I/O queue {qid} already has a Device on this host")
        self.counts = {"commands": 0, "pages_written": 0, "pages_read": 0}
        self.qsize = host.queues[qid].entries
        self.host_queues = len(host.io_queues)
        self._attach()

    def close(self) -> None:
        """Done with this I/O queue (the host and its controller stay up; the last Device on a host
        :meth:`Device.attach_sim_nvme` made closes its link)."""
        self._release_queue()
        sh = self._shared
        if sh.users <= 0 and sh.link is not None:
            link, sh.link = sh.link, None
            link.close()

    # -- submission ---------------------------------------------------------
    def _send(self, opcode: Opcode, fields: dict, *, payload: bytes, read_bytes: int, list_entries: bytes,
              list_data: Sequence[bytes], detail: str, timeout: float) -> Command:
        cmd = Command(0, opcode, detail, tid=fields.get("tid", 0), flags=fields.get("flags", 0))
        if opcode in (Opcode.IDENTIFY, Opcode.GET_LOG):
            answer = self._admin(opcode, fields.get("log_page", 0), read_bytes)
            cmd.cid = next(self._admin_cids)
            self._answered[cmd.cid] = answer
        else:
            cmd.cid = self.host.submit(self.qid, **self._io(opcode, fields, payload, list_entries, list_data,
                                                            read_bytes, detail))
            meant = self._invalid_field_meaning(opcode, fields, list_entries)
            if meant is not None:
                self._invalid_field[cmd.cid] = meant
        self._start(cmd, timeout)
        return cmd

    def _invalid_field_meaning(self, opcode: Opcode, fields: dict, list_entries: bytes) -> Status | None:
        """The debug port's status for what NVMe answers Invalid Field: a sized verb beyond
        max_transfer (TRANSFER_TOO_LARGE), a remap triple of 0 blocks (ZERO_LENGTH); None: INVALID_FIELD."""
        if opcode in _SIZED and fields.get("nlb", 0) > self.info.max_transfer:
            return Status.TRANSFER_TOO_LARGE
        if opcode == Opcode.REMAP:
            size = spec.REMAP_ENTRY.size
            if any(spec.REMAP_ENTRY.unpack(list_entries[i:i + size]).nlb == 0
                   for i in range(0, len(list_entries), size)):
                return Status.ZERO_LENGTH
        return None

    @staticmethod
    def _count(value: int, status: Status, what: str, detail: str, limit: int = _NVME_MAX_COUNT) -> int:
        """A 1-based count as NVMe's 0-based field (``limit`` values); one it cannot carry is refused
        unsent: 0 as ZERO_LENGTH (what the device answers it), too many as ``status``."""
        if value < 1:
            raise errors.ZeroLength(f"{detail}: {what} 0; refused by the host, not sent", submitted=False)
        if value > limit:
            raise errors.error_class(status)(f"{detail}: {what} {value} does not fit NVMe's count of at most "
                                             f"{limit}; refused by the host, not sent", submitted=False)
        return value - 1

    def _io(self, opcode: Opcode, fields: dict, payload: bytes, list_entries: bytes, list_data: Sequence[bytes],
            read_bytes: int, detail: str) -> dict:
        """NvmeHost.submit's arguments for one atomflash command (docs/nvme.md, the vendor command table)."""
        from .nvme import cdw10_11
        from .spec import NvmeField as F
        from .spec import NvmeIoOpcode as Io

        lba, nlb, tid = fields.get("lba", 0), fields.get("nlb", 0), fields.get("tid", 0)
        flags = spec.CMD.decompose("flags", fields.get("flags", 0))

        def cdw12(**bits) -> int:
            return spec.NVME_SQE.compose("cdw12", nlb=self._count(nlb, Status.TRANSFER_TOO_LARGE, "nlb", detail),
                                         **bits)

        if opcode == Opcode.READ:
            return dict(opcode=Io.READ, slba=lba, cdw12=cdw12(), data_in=read_bytes)
        if opcode == Opcode.TX_READ:
            return dict(opcode=Io.TX_READ, slba=lba, cdw12=cdw12(), cdw13=tid, data_in=read_bytes)
        if opcode == Opcode.WRITE:
            return dict(opcode=Io.WRITE, slba=lba, cdw12=cdw12(fua=flags.fua), data_out=payload)
        if opcode == Opcode.TX_WRITE:
            return dict(opcode=Io.TX_WRITE, slba=lba, cdw12=cdw12(tx_final=flags.tx_final, tx_new=flags.tx_new),
                        cdw13=tid, data_out=payload)
        if opcode == Opcode.APPEND:
            return dict(opcode=Io.APPEND, cdw12=cdw12(fua=flags.fua), data_out=payload)
        if opcode == Opcode.DEALLOCATE:
            self._count(nlb, Status.TRANSFER_TOO_LARGE, "nlb", detail, limit=1 << 32)   # a range's count: 32-bit
            return dict(opcode=Io.DATASET_MANAGEMENT, slba=cdw10_11(F.NR.put(0), F.AD.put(1)),
                        data_out=spec.NVME_DSM_RANGE.pack(slba=lba, nlb=nlb))
        if opcode == Opcode.FLUSH:
            return dict(opcode=Io.FLUSH)
        if opcode == Opcode.HINT:
            return dict(opcode=Io.HINT, cdw13=fields.get("hint", 0))
        if opcode in (Opcode.TX_COMMIT, Opcode.TX_ABORT):
            return dict(opcode=Io.TX_COMMIT if opcode == Opcode.TX_COMMIT else Io.TX_ABORT, cdw13=tid)
        if opcode == Opcode.RELEASE:
            return dict(opcode=Io.RELEASE, cdw14_15=fields.get("token", 0))
        n = self._count(fields.get("nlist", 0), Status.LIST_TOO_LONG, "nlist", detail) + 1
        if opcode == Opcode.ATOMIC_WRITE:
            size = spec.ATOMIC_ENTRY.size
            lbas = [spec.ATOMIC_ENTRY.unpack(list_entries[i * size:(i + 1) * size]).lba for i in range(n)]
            return dict(opcode=Io.ATOMIC_WRITE, cdw12=n - 1, data_out=b"".join(list_data),
                        metadata=b"".join(x.to_bytes(8, "little") for x in lbas))
        if opcode == Opcode.REMAP:
            size = spec.REMAP_ENTRY.size
            triples = [spec.REMAP_ENTRY.unpack(list_entries[i * size:(i + 1) * size]) for i in range(n)]
            return dict(opcode=Io.REMAP, cdw12=n - 1, data_out=b"".join(
                spec.NVME_REMAP_ENTRY.pack(lba=t.lba, token=t.token, nlb=t.nlb) for t in triples))
        raise InvalidArgument(f"{detail or opcode.name}: {opcode.name} has no NVMe command")

    def _admin(self, opcode: Opcode, log_page: int, read_bytes: int) -> tuple:
        """IDENTIFY and GET_LOG through the admin queue, at once: (status, error, result, data)."""
        from .nvme import NvmeError

        if opcode == Opcode.IDENTIFY:
            run = self._identify_record
        else:
            lid = {LogPage.STATS: spec.NvmeLogPage.ATOMFLASH_STATS,
                   LogPage.OPEN: spec.NvmeLogPage.ATOMFLASH_OPEN}.get(log_page)
            if lid is None:       # SNAPSHOT: the firmware's queue only, INVALID_FIELD for a host's
                return Status.INVALID_FIELD, None, 0, b""
            run = lambda: self.host.log_page(lid, read_bytes)  # noqa: E731
        try:
            return Status.SUCCESS, None, 0, run()
        except NvmeError as e:
            return None, e, 0, b""
        except errors.AtomflashError as e:
            return e.status, None, 0, b""

    def _identify_record(self) -> bytes:
        """``spec.IDENTIFY`` from Identify Controller and Identify Namespace."""
        from .spec import NvmeCns

        ctrl = spec.NVME_ID_CTRL.unpack(self.host.identify(NvmeCns.CONTROLLER))
        ns = spec.NVME_ID_NS.unpack(self.host.identify(NvmeCns.NAMESPACE, nsid=spec.NVME.NSID))
        if ctrl.af_magic != spec.IDENTIFY_MAGIC:
            raise DeviceError("not an atomflash drive: Identify Controller has no IDENTIFY_MAGIC at byte 3072")
        if ctrl.af_spec_version != spec.SPEC_VERSION:
            raise DeviceError(f"device implements spec {ctrl.af_spec_version}, this library {spec.SPEC_VERSION}")
        return spec.IDENTIFY.pack(
            magic=ctrl.af_magic, spec_version=ctrl.af_spec_version, capacity=ns.nsze,
            lba_size=1 << spec.NVME_ID_NS.decompose("lbaf0", ns.lbaf0).lbads, max_transfer=ctrl.awun + 1,
            max_atomic_pages=ctrl.af_max_atomic_pages, max_open_tx=ctrl.af_max_open_tx,
            max_pending=ctrl.af_max_pending, max_remap_triples=ctrl.af_max_remap_triples,
            awupf=ctrl.af_max_atomic_pages, volatile_cache=ctrl.vwc & 1, queue_depth=self.qsize,
            max_appends=ctrl.af_max_appends)

    # -- completion ---------------------------------------------------------
    @classmethod
    def _reap(cls, devs: Sequence["NvmeDevice"]) -> list[Command]:
        return [c for d in devs for c in d._collect_posted()]

    @staticmethod
    def _idle(devs: Sequence["NvmeDevice"]) -> None:
        """Let a device on its own time (a simulated one) run, else wait a little."""
        for link in {id(d.host.link): d.host.link for d in devs}.values():
            advance = getattr(link, "advance", None)
            if advance is None:
                time.sleep(0.002)
                return
            advance()

    def _collect_posted(self) -> list[Command]:
        out = [self._finish(self._inflight.pop(cid), *self._answered.pop(cid)) for cid in list(self._answered)]
        for c, data in self.host.collect(self.qid):
            cmd = self._inflight.pop(c.cid, None)
            if cmd is None:
                raise DeviceError(f"queue {self.qid}: completion for cid {c.cid}, which is not in flight")
            out.append(self._finish(cmd, *self._outcome(cmd, c), c.result, data))
        return out

    def _outcome(self, cmd: Command, c) -> tuple:
        """(status, error) of an NVMe completion: the atomflash Status it reports, or an NvmeError."""
        from .nvme import NvmeError

        meant = self._invalid_field.pop(cmd.cid, None)
        try:
            status = spec.atomflash_status_of(c.sct, c.sc)
        except ValueError:      # command specific from C0h, but no Status of this library's
            status = None
        if status is None:
            return None, NvmeError(c.sct, c.sc, cmd.detail)
        if status == Status.INVALID_FIELD and meant is not None:
            status = meant
        return Status(status), None

    def _finish(self, cmd: Command, status, error, result: int, data: bytes) -> Command:
        cmd.status, cmd.error, cmd.result = status, error, result
        cmd.data = data if status == Status.SUCCESS else b""
        cmd.done = True
        self._track(cmd)
        return cmd


class DeviceSet(list):
    """Devices on one transport, one per host queue pair (:meth:`Device.open_queues`), or on one
    NvmeHost, one per I/O queue (:meth:`Device.attach_nvme_all`)."""

    def poll(self, block: bool = False) -> list[Command]:
        """Completions of every queue (:meth:`Device.poll_any`)."""
        return Device.poll_any(self, block=block)

    @property
    def in_flight(self) -> int:
        return sum(d.in_flight for d in self)

    def wait_all(self, *, check: bool = True) -> None:
        while self.in_flight:
            for c in self.poll(block=True):
                if check:
                    c.check()

    def close(self) -> None:
        for d in self:
            d.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Transaction:
    """A transaction (``Device.transaction()``); it is opened on the device by its first write."""

    DRAWS = 8   # ids drawn before giving up when the device says each is in use

    def __init__(self, dev: Device, tid: int | None, *, chosen: bool = False):
        self.dev = dev
        self.chosen = chosen                 # the id was drawn by the library: another may be drawn
        self.tid = dev.new_tid() if tid is None else tid
        self.state = "new"                   # new -> open -> committed / aborted

    def write(self, lba: int, data: bytes, *, final: bool = False) -> None:
        """Stage ``data`` at ``lba``; ``final`` commits the transaction with
        this write (no commit record: the commit rides on its last page)."""
        if self.state == "new":
            for attempt in range(self.DRAWS):
                try:
                    self.dev.tx_write(self.tid, lba, data, final=final, new=True)
                    break
                except errors.TidInUse:
                    if not self.chosen or attempt == self.DRAWS - 1:
                        raise
                    self.tid = self.dev.new_tid()
        else:
            self.dev.tx_write(self.tid, lba, data, final=final)
        self.state = "committed" if final else "open"

    def read(self, lba: int, nlb: int = 1) -> bytes:
        """What this transaction sees: its own latest writes, else committed data."""
        return self.dev.tx_read(self.tid, lba, nlb)

    def commit(self) -> None:
        if self.state != "new":               # nothing written: nothing to commit
            self.dev.tx_commit(self.tid)
        self.state = "committed"

    def abort(self) -> None:
        if self.state != "new":
            self.dev.tx_abort(self.tid)
        self.state = "aborted"

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.state not in ("new", "open"):
            return False
        if exc_type is None:
            self.commit()
        elif self.tid in self.dev.open_tids:
            try:
                self.abort()
            except errors.Error:
                pass            # the block's own exception is the one to see (its tid may not be open)
        else:
            self.state = "aborted"
        return False
