"""How the host library reaches a device: 32-bit reads and writes in the
device's address space.  The protocol (queues, commands, data buffers) is in
:mod:`atomflash.device` and knows nothing of the wire.

* :class:`UartBoneTransport` -- LiteX's UARTBone byte protocol over TCP: the
  simulated SoC puts its ``hostbone`` port on a socket (``soc/sim.py
  --host-port``: the litex_sim module ``soc/hostport2tcp.c``; builds from
  before it, such as a campaign's old frozen copies, LiteX's ``serial2tcp``).
  The same protocol reaches a board's UART bridge through a serial port.
* :class:`LitexServerTransport` -- Etherbone over TCP to LiteX's
  ``litex_server``, which owns a board's serial port (``litex_server --uart
  --uart-port /dev/ttyUSB0``; docs/results/boards.md).  The board's UARTBone is the
  host port and its console a crossover UART behind it, so the console
  (``litex_term crossover``) and the host library share the one cable.
* :class:`EtherboneTransport` -- Etherbone over UDP, straight to a drive
  with the Ethernet host link (``soc.atomflash_soc.add_etherbone_host``): a
  board's IP address, or the simulated SoC's gateway (``soc/sim.py
  --etherbone-port``, the litex_sim module ``soc/eth2udp.c``).
  ``litex_server --udp --udp-ip <board>`` in front of a board works too,
  through :class:`LitexServerTransport`.
* A board on PCIe (LitePCIe) would be another class with the same two
  methods: BAR reads/writes for registers, DMA buffers for host memory.

UARTBone commands (``litex.soc.cores.uart.Stream2Wishbone``): one byte
opcode, one byte word count (1..255), the word address (byte address / 4) as
4 big-endian bytes, then for writes the words big-endian.  Reads answer with
the words, big-endian; writes answer nothing.

Flow control: serial2tcp moves up to 1,024 received bytes at a time into a
2,048-byte ring every 500 simulated cycles and never checks for room, so the
host keeps at most :data:`WINDOW_BYTES` unanswered bytes on the wire
(hostport2tcp leaves what does not fit in the socket, but the window keeps
old builds working).  The
SoC executes commands in order, so the answer to any read proves it consumed
everything sent before; writes only count bytes, and a one-word read is
inserted when the next write would overflow the window (and by :meth:`sync`).
A round trip costs at least one 500-cycle pass of the simulator's event
loop, so this, and sending every burst of a long read before collecting the
answers, is most of the host port's speed.

Delayed ACKs: serial2tcp writes its answer one byte per ``write()`` on a
socket with Nagle's algorithm on, so after the first byte the rest wait for
our ACK, which Linux delays up to 40 ms.  Every read therefore asks for a
quick ACK (``TCP_QUICKACK``, which the kernel clears again after use): a
one-word round trip went from ~13,000 simulated cycles to ~500, and a
30-command workload from 20 s of wall time to 2 s.  hostport2tcp sends an
answer in one write with ``TCP_NODELAY``: a 4 KiB read in ~5 ``recv()``
calls instead of ~400, and a third less CPU for a campaign's read-back.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Protocol, Sequence

from .errors import TransportError

__all__ = ["Transport", "UartBoneTransport", "LitexServerTransport", "EtherboneTransport", "TransportError",
           "WINDOW_BYTES"]

CMD_WRITE_BURST_INCR = 0x01  # litex.tools.remote.comm_uart's values (the gateware's)
CMD_READ_BURST_INCR = 0x02
MAX_BURST = 255
QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only; elsewhere reads wait for delayed ACKs
WINDOW_BYTES = 960  # unanswered bytes in flight (serial2tcp's ring: 2,048, refilled 1,024 at a time)



class Transport(Protocol):
    def read(self, addr: int, count: int) -> list[int]:
        """``count`` 32-bit words from byte address ``addr`` (4-byte aligned)."""

    def write(self, addr: int, words: Sequence[int]) -> None:
        """Write 32-bit words from byte address ``addr``; returns once the device has them."""

    def close(self) -> None: ...


def _check_aligned(addr: int) -> None:
    if addr % 4:
        raise ValueError(f"address 0x{addr:x} is not 4-byte aligned")


def _spans(addr: int, count: int, size: int):
    """(address, words) of ``count`` words from ``addr`` in pieces of at most ``size``."""
    while count:
        n = min(count, size)
        yield addr, n
        addr += 4 * n
        count -= n


def _read_record(addr: int, n: int):
    """An Etherbone record reading ``n`` words from ``addr`` on."""
    from litex.tools.remote.etherbone import EtherboneReads, EtherboneRecord

    record = EtherboneRecord(4)
    record.reads = EtherboneReads(addr_size=4, addrs=[addr + 4 * i for i in range(n)])
    record.rcount = n
    return record


def _write_record(addr: int, words: list[int], *, read_last: bool = False):
    """An Etherbone record writing ``words`` from ``addr`` on (then reading the last one back)."""
    from litex.tools.remote.etherbone import EtherboneReads, EtherboneRecord, EtherboneWrites

    record = EtherboneRecord(4)
    record.writes = EtherboneWrites(base_addr=addr, addr_size=4, datas=words)
    record.wcount = len(words)
    if read_last:
        record.reads = EtherboneReads(addr_size=4, addrs=[addr + 4 * (len(words) - 1)])
        record.rcount = 1
    return record


class _Closing:
    """``with transport:`` closes it."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class UartBoneTransport(_Closing):
    """UARTBone over a TCP socket (``host``, ``port``).  ``timeout``: seconds
    of silence before :class:`TransportError` (the simulation runs about
    1,000x slower than real time: keep it generous)."""

    def __init__(self, port: int, host: str = "127.0.0.1", *, timeout: float = 120.0, connect_timeout: float = 10.0):
        self.addr = (host, port)
        self.timeout = timeout
        deadline = time.monotonic() + connect_timeout
        while True:
            try:
                self.sock = socket.create_connection(self.addr, timeout=timeout)
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    raise TransportError(f"no device on tcp://{host}:{port}: {e.strerror or e}") from None
                time.sleep(0.2)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.words_read = self.words_written = 0
        self.unanswered = 0     # bytes sent since the last answer (flow control)
        self._last_addr = 0
        self.round_trips = 0

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sync()
            except TransportError:
                pass
            self.sock.close()
            self.sock = None

    # -- wire ---------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        if self.sock is None:
            raise TransportError("transport closed")
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise TransportError(f"device link lost: {e.strerror or e}") from None

    def _recv(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            try:
                if QUICKACK is not None:
                    self.sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)   # see the module's text: delayed ACKs
                chunk = self.sock.recv(n - len(out))
            except socket.timeout:
                raise TransportError(f"device silent for {self.timeout:.0f} s (simulation stalled?)") from None
            except OSError as e:
                raise TransportError(f"device link lost: {e.strerror or e}") from None
            if not chunk:
                raise TransportError("device closed the link (the simulation ended or lost power)")
            out += chunk
        return bytes(out)

    @staticmethod
    def _header(cmd: int, count: int, addr: int) -> bytes:
        _check_aligned(addr)
        return struct.pack(">BBI", cmd, count, addr // 4)

    # -- Transport ----------------------------------------------------------
    def read(self, addr: int, count: int) -> list[int]:
        # every burst's request at once (6 bytes each), then the answers in order
        bursts = []
        while count:
            n = min(count, MAX_BURST)
            bursts.append((addr, n))
            addr += 4 * n
            count -= n
        out: list[int] = []
        for i in range(0, len(bursts), WINDOW_BYTES // 6):
            batch = bursts[i:i + WINDOW_BYTES // 6]
            if self.unanswered + 6 * len(batch) > WINDOW_BYTES:
                self.sync()
            self._send(b"".join(self._header(CMD_READ_BURST_INCR, n, a) for a, n in batch))
            for _, n in batch:
                out += struct.unpack(f">{n}I", self._recv(4 * n))
                self.words_read += n
            self.unanswered = 0
            self.round_trips += 1
        return out

    def write(self, addr: int, words: Sequence[int]) -> None:
        """Sends the words; the SoC has them before it answers any later read
        (:meth:`sync` waits for that)."""
        words = list(words)
        per_chunk = (WINDOW_BYTES - 12) // 4   # a chunk and the sync read behind it fit the window
        for i in range(0, len(words), per_chunk):
            part = words[i:i + per_chunk]
            size = 6 + 4 * len(part)
            if self.unanswered + size + 6 > WINDOW_BYTES:
                self.sync()
            self._send(self._header(CMD_WRITE_BURST_INCR, len(part), addr + 4 * i)
                       + struct.pack(f">{len(part)}I", *part))
            self.unanswered += size
            self.words_written += len(part)
            self._last_addr = addr + 4 * i  # read back by sync(), as the old per-chunk check did

    def sync(self) -> None:
        """Until the SoC has consumed everything sent (a one-word read of the
        last address written, or of address 0)."""
        if self.unanswered and self.sock is not None:
            self._send(self._header(CMD_READ_BURST_INCR, 1, self._last_addr))
            self._recv(4)
            self.unanswered = 0
            self.round_trips += 1


class LitexServerTransport(_Closing):
    """Etherbone over TCP to ``litex_server`` (``host``, ``port``; its
    default port is 1234), which turns each packet into UARTBone commands on
    the board's serial port.  ``timeout``: seconds to wait for an answer
    before :class:`TransportError` (LiteX's own ``RemoteClient`` answers a
    timed-out read with zeros, which a storage host must never mistake for
    data, hence this class).

    Etherbone writes are not answered, so each write of at most
    ``WRITE_WORDS`` words is followed by a one-word read: the call returns
    once the device has the words, and no more than one burst is ever in
    flight (a simulated host port, ``litex_server --uart-port
    socket://127.0.0.1:PORT``, has no flow control beyond that)."""

    READ_WORDS = 255
    WRITE_WORDS = (WINDOW_BYTES - 12) // 4

    def __init__(self, port: int = 1234, host: str = "127.0.0.1", *, timeout: float = 30.0,
                 connect_timeout: float = 10.0):
        from litex.tools.remote.etherbone import EtherboneIPC

        self._ipc = EtherboneIPC()
        try:
            self.sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as e:
            raise TransportError(f"no litex_server on tcp://{host}:{port}: {e.strerror or e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.timeout = timeout
        try:
            self.server_info = self.sock.recv(128).decode(errors="replace")  # "CommUART:<ip>:<port>"
        except OSError as e:
            self.sock.close()
            raise TransportError(f"litex_server on tcp://{host}:{port} said nothing: {e}") from None
        self.words_read = self.words_written = self.round_trips = 0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _packet(self, record):
        from litex.tools.remote.etherbone import EtherbonePacket

        packet = EtherbonePacket(32)
        packet.records = [record]
        packet.encode()
        return packet

    def _exchange_read(self, addr: int, count: int) -> list[int]:
        from litex.tools.remote.etherbone import EtherbonePacket

        _check_aligned(addr)
        record = _read_record(addr, count)
        if self.sock is None:
            raise TransportError("transport closed")
        try:
            self._ipc.send_packet(self.sock, self._packet(record))
            answer = self._ipc.receive_packet(self.sock, 4)
        except OSError as e:
            raise TransportError(f"litex_server link lost: {e.strerror or e}") from None
        if not answer:
            raise TransportError(f"no answer from litex_server within {self.timeout:.0f} s (board silent?)")
        packet = EtherbonePacket(32, answer)
        packet.decode()
        words = packet.records.pop().writes.get_datas()
        if len(words) != count:
            raise TransportError(f"litex_server answered {len(words)} words for {count}")
        self.round_trips += 1
        return words

    def read(self, addr: int, count: int) -> list[int]:
        out = [w for a, n in _spans(addr, count, self.READ_WORDS) for w in self._exchange_read(a, n)]
        self.words_read += len(out)
        return out

    def write(self, addr: int, words: Sequence[int]) -> None:
        _check_aligned(addr)
        words = list(words)
        for i in range(0, len(words), self.WRITE_WORDS):
            part = words[i:i + self.WRITE_WORDS]
            record = _write_record(addr + 4 * i, part)
            if self.sock is None:
                raise TransportError("transport closed")
            try:
                self._ipc.send_packet(self.sock, self._packet(record))
            except OSError as e:
                raise TransportError(f"litex_server link lost: {e.strerror or e}") from None
            self._exchange_read(addr + 4 * i, 1)  # the device has the words (and the next burst has room)
            self.words_written += len(part)

    def sync(self) -> None:
        """Nothing to wait for: every write already waited for its read-back."""


class EtherboneTransport(_Closing):
    """Etherbone over UDP to a drive's Ethernet host link at ``host``:``port``
    (``spec.ETHERBONE``: the drive's address and Etherbone's port).

    Every request is one UDP datagram holding one Etherbone record, and gets
    one answer: a read answers its words; a write of at most
    :attr:`WRITE_WORDS` words carries a read of its own last word, so its
    answer says the words were written (the record's writes come first).
    The record's return address (``base_ret_addr``) is a sequence number that
    comes back as the answer's base address, matching answers to requests.

    Requests to the *pipelined region* (:meth:`pipeline`: host memory, which
    the drive only reads or writes when a doorbell tells it to) may be up to
    ``window`` in flight (``spec.ETHERBONE.window``: what the drive's receive
    buffer holds whole, ``soc/etherbone.py``): a round trip per record would
    leave the wire idle most of the time.  The drive executes records in
    order, so answers come in order; writes are posted (:meth:`write` returns
    once they are sent, :meth:`read` and :meth:`sync` wait for everything
    before them).  When the oldest request has no answer within ``timeout``
    seconds, it and every request after it are sent again in order
    (go-back-N; an answer that overtakes the oldest's is dropped, since its
    request ran before the lost one's resend), up to ``retries`` times, then
    :class:`TransportError`.  Sending memory requests again is safe: they are
    idempotent.  A request anywhere else (a register: a doorbell acts) waits
    until every earlier request is answered: were a command's data lost and
    its doorbell not, the drive would run the command on stale data before
    the resend.  Sending a doorbell again is safe too (it takes an absolute
    index).  Without a region every request waits for the one before.

    The drive answers to Etherbone's UDP port on the asker's address, so
    towards a board the socket is bound to ``bind_port`` (default: ``port``,
    as ``litex_server --udp`` does; one asker per host).  The simulated
    gateway answers whoever spoke last: ``bind_port=0`` there."""

    READ_WORDS = 255                  # one record's reads (8-bit count)
    WRITE_WORDS = 253                 # base address + words + return address + 1 read: the drive's 256-word buffer

    def __init__(self, host: str = "192.168.1.50", port: int = 1234, *, bind_port: int | None = None,
                 timeout: float = 1.0, retries: int = 5, window: int | None = None, probe: bool = True):
        from collections import deque

        from .spec import ETHERBONE

        self.address = (host, port)
        self.timeout, self.retries = timeout, retries
        self.window = ETHERBONE.window if window is None else window
        if self.window < 1:
            raise ValueError("window: at least 1 request in flight")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.bind(("", port if bind_port is None else bind_port))
            self.sock.connect(self.address)
        except OSError as e:
            self.sock.close()
            self.sock = None
            raise TransportError(f"udp://{host}:{port}: {e.strerror or e}") from None
        self._tag = 0
        self._pending = deque()   # [tag, datagram, count, what, words or None] oldest first
        self._region = (0, 0)     # (base, end): requests that may pipeline
        self.words_read = self.words_written = self.round_trips = self.resends = 0
        if probe:
            try:
                self.probe()
            except TransportError:
                self.close()
                raise

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sync()
            except TransportError:
                pass
            finally:
                self.sock.close()
                self.sock = None

    def _where(self) -> str:
        return f"udp://{self.address[0]}:{self.address[1]}"

    @staticmethod
    def _encode(record=None, probe: bool = False) -> bytes:
        from litex.tools.remote.etherbone import EtherbonePacket

        packet = EtherbonePacket(32)
        packet.pf = int(probe)
        if record is not None:
            packet.records = [record]
        packet.encode()
        return bytes(packet.bytes) + (bytes(4) if probe else b"")   # a probe carries padding

    @staticmethod
    def _decode(answer: bytes):
        """(probe reply?, the answer's base address or None, its words)."""
        from litex.tools.remote.etherbone import EtherbonePacket

        try:
            packet = EtherbonePacket(32, answer)
            packet.decode()
        except Exception:
            return False, None, []
        if packet.pr:
            return True, None, []
        writes = packet.records[0].writes if packet.records else None
        if writes is None:
            return False, None, []
        return False, writes.base_addr, writes.get_datas()

    def _send(self, datagram: bytes) -> None:
        if self.sock is None:
            raise TransportError("transport closed")
        try:
            self.sock.send(datagram)
        except OSError as e:
            raise TransportError(f"{self._where()}: {e.strerror or e}") from None

    def _recv(self, until: float) -> bytes | None:
        left = until - time.monotonic()
        if left <= 0:
            return None
        self.sock.settimeout(left)
        try:
            return self.sock.recv(65536)
        except socket.timeout:
            return None
        except ConnectionRefusedError:
            raise TransportError(f"nothing listens on {self._where()} (simulation not running?)") from None
        except OSError as e:
            raise TransportError(f"{self._where()}: {e.strerror or e}") from None

    def probe(self) -> None:
        """Etherbone's probe: the drive answers with the probe-reply flag."""
        self.sync()
        probe = self._encode(probe=True)
        for _ in range(self.retries + 1):
            self._send(probe)
            until = time.monotonic() + self.timeout
            while (answer := self._recv(until)) is not None:
                if self._decode(answer)[0]:
                    return
        raise TransportError(f"no answer from the drive at {self._where()} to a probe "
                             f"({self.retries + 1} tries, {self.timeout:g} s each)")

    def _complete_oldest(self) -> None:
        """Wait for the oldest request's answer; on silence send it and the rest again."""
        entry = self._pending[0]
        for attempt in range(self.retries + 1):
            if attempt:
                self.resends += len(self._pending)
                for e in self._pending:
                    self._send(e[1])
            until = time.monotonic() + self.timeout
            while (answer := self._recv(until)) is not None:
                _, tag, words = self._decode(answer)
                if tag == entry[0] and len(words) == entry[2]:
                    entry[4] = words
                    self._pending.popleft()
                    self.round_trips += 1
                    return
                # a stray datagram, a late answer to a finished request, or one that overtook the oldest's
        raise TransportError(f"no answer from the drive at {self._where()} to {entry[3]} "
                             f"({self.retries + 1} tries, {self.timeout:g} s each)")

    def pipeline(self, base: int, size: int) -> None:
        """Let requests to [``base``, ``base + size``) pipeline (host memory); see the class."""
        self._region = (base, base + size)

    def _post(self, record, count: int, what: str, addr: int, nbytes: int) -> list:
        """Send ``record`` (its reads' return address set to a fresh tag) once the window has room,
        or, outside the pipelined region, once every earlier request is answered."""
        base, end = self._region
        fence = not (base <= addr and addr + nbytes <= end)
        while self._pending and (fence or len(self._pending) >= self.window):
            self._complete_oldest()
        self._tag = (self._tag + 1) & 0xFFFF_FFFF
        record.reads.base_ret_addr = self._tag
        entry = [self._tag, self._encode(record), count, what, None]
        self._send(entry[1])
        self._pending.append(entry)
        return entry

    def sync(self) -> None:
        """Wait for every request in flight (posted writes included)."""
        while self._pending:
            self._complete_oldest()

    def read(self, addr: int, count: int) -> list[int]:
        _check_aligned(addr)
        entries = [self._post(_read_record(a, n), n, f"a read of {n} words at 0x{a:08x}", a, 4 * n)
                   for a, n in _spans(addr, count, self.READ_WORDS)]
        while entries and entries[-1][4] is None:
            self._complete_oldest()
        out = [w for e in entries for w in e[4]]
        self.words_read += len(out)
        return out

    def write(self, addr: int, words: Sequence[int]) -> None:
        _check_aligned(addr)
        words = list(words)
        for i in range(0, len(words), self.WRITE_WORDS):
            part = words[i:i + self.WRITE_WORDS]
            base = addr + 4 * i
            self._post(_write_record(base, part, read_last=True), 1, f"a write of {len(part)} words at 0x{base:08x}",
                       base, 4 * len(part))
            self.words_written += len(part)
