"""The root complex of the simulated SoC's PCIe link, in the host's process.

The full SoC simulation (litex_sim: the RISC-V firmware, the controller, the NAND models) carries a
PCIe function when built with ``soc/sim.py --pcie ...``; its link ends in the litex_sim module
``soc/pcie2tcp.c``, which passes whole TLPs over a TCP socket and models the link's rate and
latency in simulated time.  :class:`SimPcieLink` is the other end: the root complex a host's
chipset would be, with the host's memory (a :class:`~atomflash.hostmem.HostMemory`) behind it.

* The driver's BAR0 accesses become memory requests: :meth:`SimPcieLink.mmio_write` a posted write,
  :meth:`SimPcieLink.mmio_read` a read that waits for the device's completion.  That is the
  :class:`atomflash.nvme.NvmeLink` protocol, so ``NvmeHost`` runs on it unchanged.
* The device's memory requests are served from a thread of their own while the driver does
  whatever it does: a write lands in host memory, a read is answered with completions (cut at
  max-payload-size boundaries, which are read completion boundaries too, as a root complex may), all of one
  request's completions in one message.  A request touching a page the memory refuses
  (``HostMemory.refuse``, an IOMMU's refusal) gets an Unsupported Request completion (a read) or is
  dropped (a write), and is recorded in :attr:`SimPcieLink.refusals`.
* Interrupts: :meth:`SimPcieLink.enable_interrupts` programs the device's MSI-X table through BAR0
  with addresses in a window the link keeps for them (:data:`MSIX_WINDOW`, the vector number as the
  message data) and turns MSI-X on; a memory write into the window is a message, counted per vector
  in :attr:`SimPcieLink.interrupts`, and :meth:`SimPcieLink.wait_interrupt` waits for one.

Configuration space is not simulated (``soc/pcie_sim_phy.py``): instead of enumerating the function
the link tells the module, with a CONFIG record, what a kernel would program -- bus master enable,
max payload and read request sizes, MSI-X enable and function mask -- and places BAR0 where it
likes (:data:`DEFAULT_BAR0`; the device decodes only the offset).

**Time.**  The simulation runs freely, as it does for the UARTBone host port: it does not wait for
the host except where a device's read request has reached the host in simulated time and its
completions have not come back over the socket yet -- then it stops until they have (the host
answers in no simulated time).  DMA therefore costs what the modelled link says whatever the
host's speed; what the host starts itself (a BAR0 access) happens when it happens.  Every TLP the
device sends comes with two stamps in system-clock cycles (:class:`Tlp` ``sent_cycle``: its last
beat left the PHY; ``host_cycle``: it reached the host), and :meth:`SimPcieLink.status` returns the
simulation's cycle count, the link model and the module's counters.  ``advance()`` (what
``NvmeHost`` calls between polls) only gives the simulation a moment of wall time.

The TLP formats (3- and 4-dword headers; MRd, MWr, Cpl, CplD) are :class:`Tlp`'s
:meth:`~Tlp.encode`/:meth:`~Tlp.decode`; the socket's framing is :func:`message`/:func:`records`,
and :func:`add_sim_module` names the module in a run's ``sim_config.js``.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .errors import TransportError
from .hostmem import HostMemory, HostMemoryError

__all__ = ["SimPcieLink", "Tlp", "PcieLinkError", "add_sim_module", "message", "records",
           "DEFAULT_BAR0", "MSIX_WINDOW"]

# Framing (soc/pcie2tcp.c) -----------------------------------------------------------------------

REC_TLP, REC_CONFIG, REC_STATUS = 1, 2, 3

#: CONFIG/STATUS keys: the first six are settable, the rest only reported
KEYS = dict(link_up=1, bus_master=2, msix_enable=3, msix_mask=4, max_payload=5, max_read_request=6,
            cycle_lo=16, cycle_hi=17, clk_period_ps=18, millips_per_byte=19, latency_ps=20, framing_bytes=21,
            tlps_to_host=22, tlps_from_host=23, messages_to_host=24, messages_from_host=25, data_width=26,
            gen=27, lanes=28, last_completion_cycle_lo=29, last_completion_cycle_hi=30)
KEY_NAMES = {v: k for k, v in KEYS.items()}
SETTABLE = ("link_up", "bus_master", "msix_enable", "msix_mask", "max_payload", "max_read_request")


def message(recs: list[tuple[int, bytes]]) -> bytes:
    """One socket message of ``(kind, body)`` records, a body a whole number of dwords."""
    out = bytearray()
    for kind, body in recs:
        assert len(body) % 4 == 0
        out += struct.pack("<BBH", kind, 0, len(body) // 4) + body
    return struct.pack("<I", len(out)) + bytes(out)


def records(body: bytes):
    """The ``(kind, prefix, dwords)`` records of a message from the module (without its length):
    ``prefix`` the module's stamps (two cycle counts for a TLP, one for STATUS)."""
    pos = 0
    while pos + 4 <= len(body):
        kind, _, ndw = struct.unpack_from("<BBH", body, pos)
        pos += 4
        stamps = {REC_TLP: 2, REC_STATUS: 1}.get(kind, 0)
        prefix = struct.unpack_from(f"<{stamps}Q", body, pos)
        pos += 8 * stamps
        yield kind, prefix, body[pos:pos + 4 * ndw]
        pos += 4 * ndw


def add_sim_module(sim_config: Path, port: int, *, gen: int = 2, lanes: int = 1, latency_ns: int = 250,
                   **config) -> None:
    """Name ``pcie2tcp`` on ``port`` in a run's ``sim_config.js`` (a build of ``soc/sim.py --pcie``):
    the modelled link (generation, lanes, one-way latency) and, in ``config``, start values of
    :data:`SETTABLE` (``max_payload=256``, ...)."""
    sim_config = Path(sim_config)
    cfg = json.loads(sim_config.read_text())
    cfg = [m for m in cfg if m.get("module") != "pcie2tcp"]
    args = {"port": str(port), "gen": str(gen), "lanes": str(lanes), "latency_ns": str(latency_ns),
            **{k: str(int(v)) for k, v in config.items() if k in SETTABLE}}
    cfg.insert(-1, {"module": "pcie2tcp", "interface": [{"name": "pcie_sim", "index": 0}, "sys_clk"],
                    "args": args})
    sim_config.write_text(json.dumps(cfg, indent=4))


# TLPs -------------------------------------------------------------------------------------------

FMT_3DW, FMT_4DW, FMT_3DW_DATA, FMT_4DW_DATA = 0, 1, 2, 3
TYPE_MEM, TYPE_CPL = 0x00, 0x0A
CPL_SC, CPL_UR, CPL_CA = 0, 1, 4

#: the root complex's ID; the function is bus 1, device 0, function 0 (soc.pcie_sim_phy.SIM_DEVICE_ID)
ROOT_ID = 0x0000


@dataclass
class Tlp:
    """A memory request or a completion.

    ``kind``: ``"MRd"``, ``"MWr"``, ``"Cpl"`` or ``"CplD"``.  Requests: ``address`` (bytes; a 4-dword
    header when it needs more than 32 bits), ``length`` (dwords), ``requester_id``, ``tag``,
    ``first_be``/``last_be``, ``data`` (a write's payload).  Completions: ``completer_id``,
    ``status`` (:data:`CPL_SC`, :data:`CPL_UR`, ...), ``byte_count`` (bytes left of the request,
    this completion's included), ``lower_address``, ``requester_id``, ``tag``, ``data``.  Decoded
    from the device: ``sent_cycle``/``host_cycle`` (the module's stamps) and ``message`` (the number
    of the socket message it came in)."""

    kind: str
    address: int = 0
    length: int = 1
    requester_id: int = ROOT_ID
    tag: int = 0
    first_be: int = 0xF
    last_be: int = 0x0
    completer_id: int = ROOT_ID
    status: int = CPL_SC
    byte_count: int = 0
    lower_address: int = 0
    data: bytes = b""
    sent_cycle: int | None = field(default=None, compare=False)
    host_cycle: int | None = field(default=None, compare=False)
    message: int | None = field(default=None, compare=False)

    @property
    def is_request(self) -> bool:
        return self.kind in ("MRd", "MWr")

    def encode(self) -> bytes:
        """The TLP's dwords, each little endian (header dwords as numbers, payload in address order)."""
        length = self.length & 0x3FF
        if self.kind in ("MWr", "CplD"):
            assert len(self.data) == 4 * (self.length or 1024), "payload and length disagree"
        if self.is_request:
            wide = self.address >= 1 << 32
            fmt = (FMT_4DW if wide else FMT_3DW) | (2 if self.kind == "MWr" else 0)
            dw0 = fmt << 29 | TYPE_MEM << 24 | length
            dw1 = self.requester_id << 16 | (self.tag & 0xFF) << 8 | (self.last_be & 0xF) << 4 | self.first_be & 0xF
            addr = [self.address >> 32, self.address & 0xFFFF_FFFC] if wide else [self.address & 0xFFFF_FFFC]
            return struct.pack(f"<{2 + len(addr)}I", dw0, dw1, *addr) + self.data
        fmt = FMT_3DW_DATA if self.kind == "CplD" else FMT_3DW
        dw0 = fmt << 29 | TYPE_CPL << 24 | length
        dw1 = self.completer_id << 16 | (self.status & 7) << 13 | self.byte_count & 0xFFF
        dw2 = self.requester_id << 16 | (self.tag & 0xFF) << 8 | self.lower_address & 0x7F
        return struct.pack("<3I", dw0, dw1, dw2) + self.data

    @classmethod
    def decode(cls, raw: bytes) -> "Tlp":
        dw0, dw1 = struct.unpack_from("<2I", raw)
        fmt, typ, length = dw0 >> 29 & 7, dw0 >> 24 & 0x1F, dw0 & 0x3FF
        hdr = 16 if fmt & 1 else 12
        data = bytes(raw[hdr:hdr + 4 * (length or 1024)]) if fmt & 2 else b""
        if typ == TYPE_MEM:
            if fmt & 1:
                hi, lo = struct.unpack_from("<2I", raw, 8)
                address = hi << 32 | lo & 0xFFFF_FFFC
            else:
                address = struct.unpack_from("<I", raw, 8)[0] & 0xFFFF_FFFC
            return cls("MWr" if fmt & 2 else "MRd", address=address, length=length or 1024,
                       requester_id=dw1 >> 16, tag=dw1 >> 8 & 0xFF, first_be=dw1 & 0xF, last_be=dw1 >> 4 & 0xF,
                       data=data)
        if typ == TYPE_CPL:
            dw2 = struct.unpack_from("<I", raw, 8)[0]
            return cls("CplD" if fmt & 2 else "Cpl", length=length, completer_id=dw1 >> 16, status=dw1 >> 13 & 7,
                       byte_count=dw1 & 0xFFF or 4096, requester_id=dw2 >> 16, tag=dw2 >> 8 & 0xFF,
                       lower_address=dw2 & 0x7F, data=data)
        raise PcieLinkError(f"a TLP of format {fmt} type {typ:#x} (not a memory request or completion)")


class PcieLinkError(TransportError):
    """The link failed: no module to connect to, an answer that never came, an error completion, the
    simulation gone (a power cut): a :class:`~atomflash.errors.TransportError`, as the debug port's."""


# The root complex -------------------------------------------------------------------------------

#: where BAR0 is put (the device decodes the offset only)
DEFAULT_BAR0 = 0xE000_0000
#: MSI-X messages: writes into this window (``(base, size)``), the vector number as data
MSIX_WINDOW = (0xFEE0_0000, 0x10_0000)
#: the device's MSI-X table in BAR0 and its size (soc.pcie.PcieConfig's defaults)
MSIX_TABLE_OFFSET = 0x2000
MSIX_VECTORS = 16


class SimPcieLink:
    """The root complex on ``soc/pcie2tcp.c``'s TCP port (see the module docstring).

    Parameters
    ----------
    port : int
        The module's TCP port (``add_sim_module``, ``soc/sim.py --pcie-port``).
    memory : HostMemory
        What the device's DMA reads and writes.
    max_payload, max_read_request : int
        Bytes; what a kernel would program into Device Control (also how completions are cut).
    bus_master : bool
        Bus master enable from the start.
    bar0 : int
        BAR0's address on the link.
    timeout : float
        Wall-clock seconds to connect, and for a BAR0 read's completion or a STATUS answer.
    poll_s : float
        Wall-clock seconds :meth:`advance` sleeps.
    """

    def __init__(self, port: int, memory: HostMemory, *, host: str = "127.0.0.1", max_payload: int = 256,
                 max_read_request: int = 512, bus_master: bool = True, bar0: int = DEFAULT_BAR0,
                 timeout: float = 30.0, poll_s: float = 0.0005):
        self.memory, self.bar0, self.timeout, self.poll_s = memory, bar0, timeout, poll_s
        self.max_payload = max_payload
        self.interrupts: Counter[int] = Counter()       # MSI-X messages received, by vector
        self._taken: Counter[int] = Counter()           # of those, what wait_interrupt returned
        self.refusals: list[tuple[str, int, int]] = []  # (kind, address, bytes) of refused DMA
        self.device_tlps: list[Tlp] = []                # every TLP the device sent, in order
        self.messages_received = self.messages_sent = 0
        self.advances = 0
        self._lock = threading.Condition()
        self._send_lock = threading.Lock()
        self._answers: dict[int, Tlp] = {}              # BAR0 read completions by tag
        self._status: list[dict] = []
        self._tag = 0
        self._error: BaseException | None = None
        self._closed = False
        self._sock = self._connect(host, port)
        self._reader = threading.Thread(target=self._serve, name="pcie-root-complex", daemon=True)
        self._reader.start()
        self.configure(link_up=1, bus_master=int(bus_master), max_payload=max_payload,
                       max_read_request=max_read_request)

    def _connect(self, host: str, port: int) -> socket.socket:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                sock = socket.create_connection((host, port), timeout=1.0)
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    raise PcieLinkError(f"no PCIe link on {host}:{port}: {e}") from e
                time.sleep(0.05)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._reader.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- sending -------------------------------------------------------------------------------
    def _send(self, recs: list[tuple[int, bytes]]) -> None:
        data = message(recs)
        with self._send_lock:
            try:
                self._sock.sendall(data)
            except OSError as e:
                raise PcieLinkError(f"the link failed: {e}") from e
            self.messages_sent += 1

    def _wait(self, ready, what: str):
        deadline = time.monotonic() + self.timeout
        with self._lock:
            while True:
                if self._error is not None:
                    raise PcieLinkError(f"the link failed: {self._error}") from self._error
                value = ready()
                if value is not None:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PcieLinkError(f"{what}: no answer within {self.timeout} s")
                self._lock.wait(left)

    # -- configuration and status ----------------------------------------------------------------
    def configure(self, **settings: int) -> dict:
        """Set :data:`SETTABLE` fields (``bus_master=0``, ``max_payload=128``, ...); returns the
        module's status after them (:meth:`status`)."""
        body = b""
        for name, value in settings.items():
            if name not in SETTABLE:
                raise ValueError(f"{name}: not one of {SETTABLE}")
            body += struct.pack("<2I", KEYS[name], int(value))
        with self._lock:
            n = len(self._status)
        self._send([(REC_CONFIG, body)])
        st = self._wait(lambda: self._status[n] if len(self._status) > n else None, "CONFIG")
        if "max_payload" in settings:
            self.max_payload = int(settings["max_payload"])
        return st

    def status(self) -> dict:
        """The module's state: the settings, ``cycle`` (system-clock cycles so far), the link model
        (``gen``, ``lanes``, ``ps_per_byte``, ``latency_ps``, ``framing_bytes``, ``clk_period_ps``),
        counters (``tlps_to_host``, ``messages_to_host``, ...) and ``last_completion_cycle`` (when the
        last beat of the latest completion entered the device).  Every TLP the device sent before
        it is in :attr:`device_tlps` when it returns."""
        return self.configure()

    # -- NvmeLink -------------------------------------------------------------------------------
    def mmio_read(self, offset: int) -> int:
        """A dword of BAR0 (a memory read request and its completion)."""
        with self._lock:
            tag = self._tag
            self._tag = (self._tag + 1) & 0xFF
            self._answers.pop(tag, None)
        self._send([(REC_TLP, Tlp("MRd", address=self.bar0 + offset, length=1, tag=tag).encode())])
        cpl = self._wait(lambda: self._answers.pop(tag, None), f"BAR0 read at {offset:#x}")
        if cpl.status != CPL_SC or cpl.kind != "CplD":
            raise PcieLinkError(f"BAR0 read at {offset:#x}: completion status {cpl.status}")
        return struct.unpack_from("<I", cpl.data)[0]

    def mmio_write(self, offset: int, value: int) -> None:
        """A dword of BAR0 (a posted memory write)."""
        self._send([(REC_TLP, Tlp("MWr", address=self.bar0 + offset, length=1,
                                  data=struct.pack("<I", value & 0xFFFF_FFFF)).encode())])

    def advance(self) -> None:
        """What ``NvmeHost`` calls between polls: the simulation runs on its own, so a short sleep; a
        link that failed (the simulation ended) raises here, so a poll does not wait for its timeout."""
        self.advances += 1
        if self._error is not None:
            raise PcieLinkError(f"the link failed: {self._error}") from self._error
        time.sleep(self.poll_s)

    # -- interrupts -----------------------------------------------------------------------------
    def enable_interrupts(self, vectors: int) -> int:
        """Program ``vectors`` MSI-X table entries (address in :data:`MSIX_WINDOW`, data the vector
        number, unmasked) and enable MSI-X; how many it got."""
        n = max(0, min(vectors, MSIX_VECTORS))
        for k in range(n):
            entry = MSIX_TABLE_OFFSET + 16 * k
            self.mmio_write(entry + 0, MSIX_WINDOW[0])
            self.mmio_write(entry + 4, 0)
            self.mmio_write(entry + 8, k)
            self.mmio_write(entry + 12, 0)
        self.configure(msix_enable=1, msix_mask=0)
        return n

    def wait_interrupt(self, vector: int, timeout: float = 5.0) -> bool:
        """Until ``vector`` has sent a message this method has not yet returned for; False if none
        comes within ``timeout`` wall-clock seconds."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.interrupts[vector] <= self._taken[vector]:
                left = deadline - time.monotonic()
                if left <= 0 or self._error is not None:
                    return False
                self._lock.wait(left)
            self._taken[vector] += 1
            return True

    # -- the device's requests (the reader thread) -------------------------------------------------
    def _serve(self) -> None:
        try:
            while not self._closed:
                head = self._recv_exact(4)
                if head is None:
                    break
                body = self._recv_exact(struct.unpack("<I", head)[0])
                if body is None:
                    break
                self._take_message(body)
        except BaseException as e:   # noqa: BLE001  (reported to whoever waits)
            if not self._closed:
                with self._lock:
                    self._error = e
                    self._lock.notify_all()
            return
        with self._lock:
            if not self._closed:
                self._error = PcieLinkError("the simulation closed the link")
            self._lock.notify_all()

    def _recv_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self._sock.recv(min(n - len(buf), 1 << 20))
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _take_message(self, body: bytes) -> None:
        with self._lock:
            self.messages_received += 1
            number = self.messages_received
        answers: list[tuple[int, bytes]] = []
        for kind, prefix, dwords in records(body):
            if kind == REC_STATUS:
                values = struct.unpack(f"<{len(dwords) // 4}I", dwords)
                st = {KEY_NAMES.get(k, k): v for k, v in zip(values[::2], values[1::2])}
                st["cycle"] = prefix[0]
                st["last_completion_cycle"] = st.pop("last_completion_cycle_lo", 0) | \
                    st.pop("last_completion_cycle_hi", 0) << 32
                st.pop("cycle_lo", None), st.pop("cycle_hi", None)
                st["ps_per_byte"] = st.pop("millips_per_byte", 0) / 1000
                with self._lock:
                    self._status.append(st)
                    self._lock.notify_all()
                continue
            if kind != REC_TLP:
                continue
            tlp = Tlp.decode(dwords)
            tlp.sent_cycle, tlp.host_cycle, tlp.message = prefix[0], prefix[1], number
            with self._lock:
                self.device_tlps.append(tlp)
            if tlp.kind == "MWr":
                self._device_write(tlp)
            elif tlp.kind == "MRd":
                answers += [(REC_TLP, c.encode()) for c in self._device_read(tlp)]
            else:
                with self._lock:
                    self._answers[tlp.tag] = tlp
                    self._lock.notify_all()
        if answers:
            self._send(answers)

    def _device_write(self, tlp: Tlp) -> None:
        base, size = MSIX_WINDOW
        if base <= tlp.address < base + size:
            vector = struct.unpack_from("<I", tlp.data)[0] if len(tlp.data) >= 4 else -1
            with self._lock:
                self.interrupts[vector] += 1
                self._lock.notify_all()
            return
        try:
            self.memory.write(tlp.address, tlp.data)
        except HostMemoryError:
            with self._lock:
                self.refusals.append(("write", tlp.address, len(tlp.data)))

    def _device_read(self, req: Tlp) -> list[Tlp]:
        """The completions of a read request: CplDs cut at max-payload-size boundaries, or one UR
        (byte count 0, as cocotbext-pcie's root complex sends it: LitePCIe ends a request on the
        completion whose length matches its byte count)."""
        nbytes = 4 * req.length
        common = dict(requester_id=req.requester_id, tag=req.tag, completer_id=ROOT_ID)
        try:
            data = self.memory.read(req.address, nbytes)
        except HostMemoryError:
            with self._lock:
                self.refusals.append(("read", req.address, nbytes))
            return [Tlp("Cpl", length=0, status=CPL_UR, byte_count=0,
                        lower_address=req.address & 0x7F, **common)]
        out, addr, pos = [], req.address, 0
        mps = max(self.max_payload, 128)
        while pos < nbytes:
            take = min(nbytes - pos, mps - addr % mps)
            out.append(Tlp("CplD", length=take // 4, byte_count=(nbytes - pos) & 0xFFF,
                           lower_address=addr & 0x7F, data=data[pos:pos + take], **common))
            addr, pos = addr + take, pos + take
        return out

