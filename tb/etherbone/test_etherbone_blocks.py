"""soc/etherbone.py's receive side in Migen's simulator, against a reference
of what must come out.

* ``RxFrameBuffer``: a PHY that cannot be held off sends frames back to back
  while the MAC side stalls at random (long stalls included).  Every frame
  comes out whole or not at all, in order, and the ``dropped`` count is the
  frames missing; with the MAC always ready nothing is dropped.
* ``_store_params_once`` on LiteX's ``PacketFIFO``: packets queued back to
  back behind a stalling reader keep their own parameters.  The same stimulus
  without the fix shows the bug it fixes (a packet's parameters stored twice),
  so the test can fail.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from migen import ClockDomain, Module
from migen.sim import run_simulation

from litex.soc.interconnect import stream
from litex.soc.interconnect.packet import PacketFIFO

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from soc.etherbone import RxFrameBuffer, _store_params_once  # noqa: E402


class FakePhy(Module):
    """A PHY's streams as LiteEth sees them (8 bits; no backpressure on receive)."""

    dw = 8

    def __init__(self):
        from liteeth.common import eth_phy_description

        self.source = stream.Endpoint(eth_phy_description(8))
        self.sink = stream.Endpoint(eth_phy_description(8))


class RxBufferTB(Module):
    """The buffer behind a fake PHY in the receive clock domain (the same clock as sys here)."""

    def __init__(self, depth: int, max_frame: int):
        self.clock_domains.cd_eth_rx = ClockDomain()
        self.submodules.phy = FakePhy()
        self.submodules.buf = RxFrameBuffer(self.phy, depth=depth, max_frame=max_frame)

    def run(self, frames: list[bytes], *, stall: float, seed: int, tail: int = 4000) -> list[bytes]:
        rnd = random.Random(seed)
        out: list[bytes] = []
        cur = bytearray()
        sent = [False]

        def phy():
            src = self.phy.source
            for f in frames:
                for i, b in enumerate(f):
                    yield src.valid.eq(1)
                    yield src.data.eq(b)
                    yield src.last.eq(i == len(f) - 1)
                    yield
                yield src.valid.eq(0)
                yield src.last.eq(0)
                for _ in range(rnd.randrange(1, 4)):   # the inter-frame gap
                    yield
            sent[0] = True

        def mac():
            src = self.buf.source
            held = 0
            while not sent[0] or held < tail:
                held += sent[0]
                if rnd.random() < stall:
                    yield src.ready.eq(0)
                    for _ in range(rnd.choice((1, 3, 40, 400))):   # short and long waits on the bus
                        yield
                    continue
                yield src.ready.eq(1)
                yield
                if (yield src.valid) and (yield src.ready):
                    cur.append((yield src.data))
                    if (yield src.last):
                        out.append(bytes(cur))
                        cur.clear()
            self.counts = ((yield self.buf.frames.status), (yield self.buf.dropped.status))

        run_simulation(self, [phy(), mac()], clocks={"sys": 10, "eth_rx": 10})
        return out


def frames_for(seed: int, n: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [bytes([k & 0xFF]) + rnd.randbytes(rnd.randrange(59, 300)) for k in range(n)]


def check_whole_in_order(sent: list[bytes], got: list[bytes]) -> int:
    """Every frame out is a frame in, whole, in order; returns how many are missing."""
    it = iter(sent)
    for g in got:
        assert any(g == s for s in it), f"a frame came out cut or changed ({len(g)} bytes, first {g[:1].hex()})"
    return len(sent) - len(got)


def test_frames_pass_whole_when_the_mac_keeps_up():
    sent = frames_for(1, 12)
    tb = RxBufferTB(depth=1024, max_frame=320)
    got = tb.run(sent, stall=0.0, seed=1)
    assert got == sent and tb.counts == (len(sent), 0)


def test_a_stalled_mac_loses_whole_frames_only():
    sent = frames_for(2, 40)
    tb = RxBufferTB(depth=1024, max_frame=320)
    got = tb.run(sent, stall=0.05, seed=2)
    missing = check_whole_in_order(sent, got)
    assert 0 < missing < len(sent), missing          # the stalls were long enough to overflow, not everything
    assert tb.counts == (len(sent), missing)         # the CSRs count what was lost


class PacketFifoTB(Module):
    """LiteX's PacketFIFO (as LiteEth's Etherbone record receiver builds it: small payload
    depth, one packet's parameters), optionally with the fix."""

    def __init__(self, fixed: bool, payload_depth: int = 8):
        layout = stream.EndpointDescription([("data", 16)], [("tag", 8), ("count", 8)])
        self.submodules.fifo = PacketFIFO(layout, payload_depth=payload_depth, param_depth=1, buffered=True)
        if fixed:
            _store_params_once(self.fifo)

    def run(self, packets: list[tuple[int, list[int]]], seed: int) -> list[tuple[int, int, list[int]]]:
        rnd = random.Random(seed)
        out = []
        done = [False]

        def writer():
            sink = self.fifo.sink
            for tag, words in packets:
                for i, w in enumerate(words):
                    yield sink.valid.eq(1)
                    yield sink.data.eq(w)
                    yield sink.tag.eq(tag)
                    yield sink.count.eq(len(words))
                    yield sink.last.eq(i == len(words) - 1)
                    yield
                    while not (yield sink.ready):
                        yield
                yield sink.valid.eq(0)
            done[0] = True

        def reader():
            src = self.fifo.source
            cur = []
            idle = 0
            while idle < 200:
                idle = idle + 1 if done[0] else 0
                yield src.ready.eq(rnd.random() < 0.3)
                yield
                if (yield src.valid) and (yield src.ready):
                    cur.append((yield src.data))
                    if (yield src.last):
                        out.append(((yield src.tag), (yield src.count), cur))
                        cur = []

        run_simulation(self, [writer(), reader()])
        return out


def _packets(seed: int, n: int) -> list[tuple[int, list[int]]]:
    rnd = random.Random(seed)
    return [(k, [k << 8 | i for i in range(rnd.randrange(1, 9))]) for k in range(n)]


def test_queued_packets_keep_their_own_parameters():
    packets = _packets(3, 30)
    got = PacketFifoTB(fixed=True).run(packets, seed=3)
    assert [(t, c, w) for t, c, w in got] == [(t, len(w), w) for t, w in packets]


def test_without_the_fix_a_packet_gets_its_parameters_twice():
    packets = _packets(3, 30)
    got = PacketFifoTB(fixed=False).run(packets, seed=3)
    assert [(t, c, w) for t, c, w in got] != [(t, len(w), w) for t, w in packets]
