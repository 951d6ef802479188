"""`atomflash.transport.UartBoneTransport` against a fake UARTBone on a
socket: the byte protocol, bursts longer than 255 words, and the flow
control that keeps serial2tcp's receive ring from overflowing while writes
are not waited for one by one."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from atomflash.transport import MAX_BURST, WINDOW_BYTES, TransportError, UartBoneTransport


class FakeUartBone:
    """LiteX's Stream2Wishbone over TCP, with word memory.  Records the most
    bytes it received between two answers (what serial2tcp's ring must hold)."""

    def __init__(self):
        self.mem: dict[int, int] = {}
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.max_unanswered = 0
        self.requests = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    # hooks for a fake device behind the bridge (tb/host/test_device_queues.py)
    def written(self, word: int, value: int) -> None:
        """After the host wrote ``value`` at word address ``word``."""

    def reading(self, word: int, n: int) -> None:
        """Before the host reads ``n`` words from word address ``word``."""

    def _serve(self):
        conn, _ = self.srv.accept()
        buf = bytearray()
        unanswered = 0

        def need(n):
            nonlocal unanswered
            while len(buf) < n:
                chunk = conn.recv(65536)
                if not chunk:
                    raise EOFError
                buf.extend(chunk)
                unanswered += len(chunk)
                self.max_unanswered = max(self.max_unanswered, unanswered)

        try:
            while True:
                need(6)
                cmd, n, word = struct.unpack(">BBI", bytes(buf[:6]))
                del buf[:6]
                self.requests += 1
                if cmd == 0x01:
                    need(4 * n)
                    for i, v in enumerate(struct.unpack(f">{n}I", bytes(buf[:4 * n]))):
                        self.mem[word + i] = v
                        self.written(word + i, v)
                    del buf[:4 * n]
                elif cmd == 0x02:
                    unanswered = len(buf)  # everything before this request is consumed
                    self.reading(word, n)
                    conn.sendall(struct.pack(f">{n}I", *(self.mem.get(word + i, 0) for i in range(n))))
                else:
                    raise AssertionError(f"unknown UARTBone command {cmd:#x}")
        except EOFError:
            conn.close()


@pytest.fixture
def link():
    fake = FakeUartBone()
    t = UartBoneTransport(fake.port, timeout=10)
    yield fake, t
    t.close()


def test_read_write_and_long_bursts(link):
    fake, t = link
    words = list(range(1000, 1000 + 3 * MAX_BURST + 7))
    t.write(0x4000, words)
    assert t.read(0x4000, len(words)) == words
    assert t.read(0x4000 + 4 * 10, 3) == words[10:13]
    with pytest.raises(ValueError):
        t.read(0x4002, 1)


def test_flow_control_bounds_unanswered_bytes(link):
    fake, t = link
    rt = t.round_trips
    for i in range(200):                 # 200 small writes: none waits for an answer ...
        t.write(0x100 + 4 * i, [i])
    small_rt = t.round_trips - rt
    t.write(0x8000, list(range(5000)))   # ... nor does a long one, beyond the window's syncs
    assert t.read(0x100, 200) == list(range(200))
    assert t.read(0x8000, 5000) == list(range(5000))
    assert fake.max_unanswered <= WINDOW_BYTES
    assert small_rt == (200 * 10) // (WINDOW_BYTES - 6)   # one sync per window of 10-byte writes
    rt = t.round_trips
    t.read(0, 4 * MAX_BURST)             # four bursts, one round trip
    assert t.round_trips - rt == 1


def test_close_syncs_the_last_writes(link):
    fake, t = link
    t.write(0x200, [0xDEADBEEF])
    t.close()
    assert fake.mem[0x200 // 4] == 0xDEADBEEF


def test_no_device():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TransportError, match="no device"):
        UartBoneTransport(port, connect_timeout=0.5)


def test_csr_csv_gives_registers_regions_and_integer_constants(tmp_path):
    from atomflash.device import CsrMap, Layout

    path = tmp_path / "csr.csv"
    path.write_text("#--------\n# Auto-generated\n"
                    "csr_base,ctrl,0xf0000000,,\n"
                    "csr_register,ctrl_reset,0xf0000000,1,rw\n"
                    "constant,config_cpu_type_vexriscv,None,,\n"
                    "constant,config_cpu_name,vexriscv,,\n"
                    "constant,afctrl_ftl_offset,256,,\n"
                    "memory_region,afctrl,0x90000000,262144,io\n"
                    "memory_region,hostmem,0xa0000000,524288,io\n")
    m = CsrMap.read(path)
    assert m.registers == {"ctrl_reset": (0xF000_0000, 1)}
    assert m.constants == {"afctrl_ftl_offset": 256}     # string constants are not integers: left out
    assert Layout.from_csr_csv(path) == Layout(0x9000_0000, 0xA000_0000, 524288)
