"""The simulated host port (`soc/hostport2tcp.c`, the litex_sim module that puts UARTBone on TCP)
against a running SoC: an answer comes in one piece, not a segment per byte (LiteX's serial2tcp
wrote every byte on its own); bytes sent past the receive ring wait in the socket instead of
overwriting it; a client that leaves makes room for the next, and a newer client takes the port
from an older one."""

from __future__ import annotations

import json
import random
import struct

import pytest

from atomflash import simctl
from atomflash.device import Device
from atomflash.transport import CMD_READ_BURST_INCR, CMD_WRITE_BURST_INCR, TransportError, UartBoneTransport

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("host_port")]   # the module's booted SoC


class CountingSocket:
    """A transport's socket that counts the recv() calls its answers took."""

    def __init__(self, sock):
        self.sock, self.recvs = sock, 0

    def recv(self, n: int) -> bytes:
        self.recvs += 1
        return self.sock.recv(n)

    def __getattr__(self, name):
        return getattr(self.sock, name)


def frame(cmd: int, addr: int, words: list[int] | int) -> bytes:
    """A UARTBone command: a read of ``words`` words, or a write of the ``words`` given."""
    if isinstance(words, int):
        return UartBoneTransport._header(cmd, words, addr)
    return UartBoneTransport._header(cmd, len(words), addr) + struct.pack(f">{len(words)}I", *words)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run = tmp_path_factory.mktemp("hostport") / "run"
    simctl.start(run, simctl.SimConfig(), fresh=True)
    try:
        yield run
    finally:
        simctl.stop(run, power_cut=True)


def _port_and_memory(run):
    state = json.loads((run / "sim.json").read_text())
    dev = Device.attach_sim(run, timeout=300)   # the host interface is up: host memory is the host's
    base = dev.mem_base + dev.mem_size // 2     # past queue 0's rings: a data buffer nothing else uses
    assert dev.mem_size // 2 >= 16 * 1024
    dev.close()
    return state["port"], base


def test_the_run_uses_the_host_port_module(sim):
    cfg = json.loads((sim / "sim_config.js").read_text())
    assert [m["module"] for m in cfg if m.get("module", "").endswith("2tcp")] == ["hostport2tcp"]


def test_an_answer_comes_in_one_piece(sim):
    port, base = _port_and_memory(sim)
    t = UartBoneTransport(port)
    try:
        words = [random.Random(7).getrandbits(32) for _ in range(1024)]   # 4 KiB: a page of host memory
        t.write(base, words)
        t.sync()
        t.sock = counting = CountingSocket(t.sock)
        assert t.read(base, 1024) == words
        # 4,096 bytes in 5 bursts (255 words at most): serial2tcp took one recv() a byte or two
        assert counting.recvs <= 16, f"{counting.recvs} recv() calls for 4 KiB"
    finally:
        t.close()


def test_bytes_past_the_ring_wait_in_the_socket(sim):
    """Write bursts sent without waiting for the SoC, far more than the module's 2 KiB ring holds
    (atomflash.transport keeps within its window; a raw client need not): all of them land."""
    port, base = _port_and_memory(sim)
    t = UartBoneTransport(port)
    try:
        rnd = random.Random(3)
        blob = [rnd.getrandbits(32) for _ in range(8 * 255)]   # 8 KiB and 48 header bytes, sent at once
        t._send(b"".join(frame(CMD_WRITE_BURST_INCR, base + 4 * i, blob[i:i + 255])
                         for i in range(0, len(blob), 255)))
        t._send(frame(CMD_READ_BURST_INCR, base, 1))      # answered once every write before it is done
        assert struct.unpack(">I", t._recv(4))[0] == blob[0]
        assert t.read(base, len(blob)) == blob
    finally:
        t.close()


def test_clients_one_after_another_and_a_newer_one_takes_over(sim):
    port, base = _port_and_memory(sim)
    first = UartBoneTransport(port)
    first.write(base, [0x1111])
    assert first.read(base, 1) == [0x1111]
    first.close()
    second = UartBoneTransport(port)        # the next client, after the first left
    assert second.read(base, 1) == [0x1111]
    third = UartBoneTransport(port)         # while the second is still connected
    try:
        assert third.read(base, 1) == [0x1111]
        second.sock.settimeout(20)
        with pytest.raises(TransportError, match="closed the link|link lost"):
            second.read(base, 1)               # the port went to the newer client: closed, not left silent
    finally:
        second.sock.close()
        second.sock = None
        third.close()
