"""A SATA cable (and the two transceivers' line sides) at the parallel boundary,
and the test's top level: LiteSATA's host and the device stack joined by it.

Each direction is a :class:`CableLane`:

* OOB: a COMINIT/COMWAKE strobe from the sender becomes ``burst`` cycles of
  the matching detector strobe at the receiver, then one cycle of the
  sender's acknowledge (a transceiver finishing its burst sequence).
* data: dwords pass through an elastic buffer of ``latency`` dwords.  Like
  a receiver's clock-compensation buffer it may repeat an ALIGN (insert
  one beside an ALIGN at its head) or drop the first of two ALIGNs at its
  head; an LFSR decides each cycle, at the rates the test sets
  (``insert_rate``/``remove_rate`` out of 256; 0 turns it off), and
  ``inserted``/``removed`` count what it did.  Electrical idle from the
  sender reaches the receiver as ``rx_idle``.
* ``flip_arm``: the next data dword of a frame (after SOF, not junk after
  CONT) gets bit ``flip_bit`` inverted; ``flipped`` counts the flips.
* ``cut``: the line is dead both ways: idle, no OOB.
* ``conts`` counts the CONTs that went through.
"""

from __future__ import annotations

from amaranth import Array, ClockSignal, Instance, Module, Mux, ResetSignal, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from atomflash.spec import SATA_PRIMITIVE_CHARISK, SataPrimitive
from rtl.sata.link import SataDevice

# a dword in the cable, with the sender's electrical idle beside it
_LANE_WORD_LAYOUT = data.StructLayout({"data": 32, "charisk": 4, "idle": 1})


class CableLane(wiring.Component):
    def __init__(self, *, latency: int = 4, depth: int = 8, burst: int = 12, seed: int = 0xACE1):
        self._latency, self._depth, self._burst, self._seed = latency, depth, burst, seed
        super().__init__({
            "cut": In(1),
            # sender side
            "tx_data": In(32), "tx_charisk": In(4), "tx_idle": In(1),
            "tx_cominit_stb": In(1), "tx_cominit_ack": Out(1),
            "tx_comwake_stb": In(1), "tx_comwake_ack": Out(1),
            # receiver side
            "rx_data": Out(32), "rx_charisk": Out(4), "rx_idle": Out(1),
            "rx_cominit_stb": Out(1), "rx_comwake_stb": Out(1),
            # test controls
            "insert_rate": In(8), "remove_rate": In(8), "inserted": Out(16), "removed": Out(16),
            "flip_arm": In(1), "flip_bit": In(5), "flipped": Out(8),
            "conts": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        for stb, ack, det in ((self.tx_cominit_stb, self.tx_cominit_ack, self.rx_cominit_stb),
                              (self.tx_comwake_stb, self.tx_comwake_ack, self.rx_comwake_stb)):
            left = Signal(range(self._burst + 1))
            with m.If(left != 0):
                m.d.sync += left.eq(left - 1)
                m.d.comb += det.eq(~self.cut)
                m.d.comb += ack.eq(left == 1)
            with m.Elif(stb):
                m.d.sync += left.eq(self._burst)

        # elastic buffer: entries 0..level-1, one dword in per cycle, 0, 1 or 2 out
        n = self._depth
        entries = Array(Signal(_LANE_WORD_LAYOUT, name=f"e{i}", init={"idle": 1}) for i in range(n))
        level = Signal(range(n + 1), init=self._latency)
        incoming = Signal(_LANE_WORD_LAYOUT)
        m.d.comb += [incoming.data.eq(Mux(self.tx_idle, 0, self.tx_data)),
                     incoming.charisk.eq(Mux(self.tx_idle, 0, self.tx_charisk)),
                     incoming.idle.eq(self.tx_idle)]

        def is_align(e):
            return ~e.idle & (e.charisk == SATA_PRIMITIVE_CHARISK) & (e.data == int(SataPrimitive.ALIGN))

        lfsr = Signal(16, init=self._seed)
        m.d.sync += lfsr.eq((lfsr << 1) | (lfsr[15] ^ lfsr[14] ^ lfsr[12] ^ lfsr[3]))
        insert = (lfsr[0:8] < self.insert_rate) & is_align(entries[0]) & (level < n - 1)
        remove = ((lfsr[8:16] < self.remove_rate) & is_align(entries[0]) & is_align(entries[1])
                  & (level >= 3) & ~insert)
        out = Signal(_LANE_WORD_LAYOUT)
        with m.If(insert):
            m.d.comb += [out.data.eq(int(SataPrimitive.ALIGN)), out.charisk.eq(SATA_PRIMITIVE_CHARISK)]
            m.d.sync += [self.inserted.eq(self.inserted + 1), level.eq(level + 1)]
            for i in range(n):
                with m.If(i == level):
                    m.d.sync += entries[i].eq(incoming)
        with m.Elif(remove):
            m.d.comb += out.eq(entries[1])
            m.d.sync += [self.removed.eq(self.removed + 1), level.eq(level - 1)]
            for i in range(n):
                m.d.sync += entries[i].eq(Mux(i == level - 2, incoming, entries[(i + 2) % n]))
        with m.Else():
            m.d.comb += out.eq(entries[0])
            for i in range(n):
                m.d.sync += entries[i].eq(Mux(i == level - 1, incoming, entries[(i + 1) % n]))

        # bit flip in a frame's data
        in_frame = Signal()
        in_cont = Signal()
        out_k = ~out.idle & (out.charisk == SATA_PRIMITIVE_CHARISK)
        with m.If(out_k):
            with m.If(out.data == int(SataPrimitive.SOF)):
                m.d.sync += in_frame.eq(1)
            with m.If(out.data == int(SataPrimitive.EOF)):
                m.d.sync += in_frame.eq(0)
            with m.If(out.data == int(SataPrimitive.CONT)):
                m.d.sync += [in_cont.eq(1), self.conts.eq(self.conts + 1)]
            with m.Elif(out.data != int(SataPrimitive.ALIGN)):
                m.d.sync += in_cont.eq(0)
        armed = Signal()
        with m.If(self.flip_arm & ~armed):
            m.d.sync += armed.eq(1)
        flip = armed & in_frame & ~in_cont & ~out.idle & (out.charisk == 0)
        with m.If(flip):
            m.d.sync += [armed.eq(0), self.flipped.eq(self.flipped + 1)]
        m.d.comb += [
            self.rx_data.eq(out.data ^ Mux(flip, 1 << self.flip_bit, 0)),
            self.rx_charisk.eq(out.charisk),
            self.rx_idle.eq(out.idle | self.cut),
        ]
        with m.If(self.cut):
            m.d.comb += [self.rx_data.eq(0), self.rx_charisk.eq(0)]
        return m



class SataBackToBack(wiring.Component):
    """LiteSATA's host (``host_module``, its Verilog ports named by ``host_ports``) and :class:`SataDevice`
    joined by two :class:`CableLane`; every port the test drives or watches is flat at the top."""

    def __init__(self, host_module: str, host_ports: dict[str, str], *, device_kwargs=None):
        self._host_module, self._host_ports = host_module, host_ports
        self.device = SataDevice(**(device_kwargs or {}))
        self.down = CableLane(seed=0xACE1)   # host -> device
        self.up = CableLane(seed=0x1D0F)     # device -> host
        super().__init__({
            "cut": In(1), "host_rst": In(1),
            "host_sink_valid": In(1), "host_sink_ready": Out(1), "host_sink_data": In(32), "host_sink_last": In(1),
            "host_source_valid": Out(1), "host_source_ready": In(1), "host_source_data": Out(32),
            "host_source_last": Out(1), "host_source_error": Out(1),
            "host_phy_ready": Out(1), "host_tx_result_valid": Out(1), "host_tx_result_ok": Out(1),
            "dev_tx_valid": In(1), "dev_tx_ready": Out(1), "dev_tx_data": In(32), "dev_tx_last": In(1),
            "dev_status_valid": Out(1), "dev_status_ready": In(1), "dev_status_ok": Out(1),
            "dev_rx_valid": Out(1), "dev_rx_ready": In(1), "dev_rx_data": Out(32), "dev_rx_last": Out(1),
            "dev_rx_error": Out(1), "dev_link_up": Out(1),
            "insert_rate": In(8), "remove_rate": In(8), "inserted": Out(16), "removed": Out(16),
            "flip_down": In(1), "flip_up": In(1), "flip_bit": In(5), "flipped_down": Out(8), "flipped_up": Out(8),
            "conts_up": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.device = dev = self.device
        m.submodules.down = down = self.down
        m.submodules.up = up = self.up
        for lane in (down, up):
            m.d.comb += [lane.cut.eq(self.cut), lane.insert_rate.eq(self.insert_rate),
                         lane.remove_rate.eq(self.remove_rate), lane.flip_bit.eq(self.flip_bit)]
        m.d.comb += [self.inserted.eq(down.inserted + up.inserted), self.removed.eq(down.removed + up.removed),
                     down.flip_arm.eq(self.flip_down), up.flip_arm.eq(self.flip_up),
                     self.flipped_down.eq(down.flipped), self.flipped_up.eq(up.flipped),
                     self.conts_up.eq(up.conts)]

        # device transceiver <-> lanes
        t = dev.trx
        m.d.comb += [
            t.ready.eq(1),
            up.tx_data.eq(t.tx_data), up.tx_charisk.eq(t.tx_charisk), up.tx_idle.eq(t.tx_idle),
            up.tx_cominit_stb.eq(t.tx_cominit_stb), t.tx_cominit_ack.eq(up.tx_cominit_ack),
            up.tx_comwake_stb.eq(t.tx_comwake_stb), t.tx_comwake_ack.eq(up.tx_comwake_ack),
            t.rx_data.eq(down.rx_data), t.rx_charisk.eq(down.rx_charisk), t.rx_idle.eq(down.rx_idle),
            t.rx_cominit_stb.eq(down.rx_cominit_stb), t.rx_comwake_stb.eq(down.rx_comwake_stb),
        ]
        # device transport-side ports
        m.d.comb += [
            dev.tx.valid.eq(self.dev_tx_valid), self.dev_tx_ready.eq(dev.tx.ready),
            dev.tx.payload.data.eq(self.dev_tx_data), dev.tx.payload.last.eq(self.dev_tx_last),
            self.dev_status_valid.eq(dev.tx_status.valid), dev.tx_status.ready.eq(self.dev_status_ready),
            self.dev_status_ok.eq(dev.tx_status.payload.ok),
            self.dev_rx_valid.eq(dev.rx.valid), dev.rx.ready.eq(self.dev_rx_ready),
            self.dev_rx_data.eq(dev.rx.payload.data), self.dev_rx_last.eq(dev.rx.payload.last),
            self.dev_rx_error.eq(dev.rx.payload.error), self.dev_link_up.eq(dev.link_up),
        ]
        # the host: its transceiver port on the lanes
        host_tx_data, host_tx_charisk, host_tx_idle = Signal(32), Signal(4), Signal()
        p = self._host_ports
        conns = {
            "clk": ("i", "sync_clk"), "rst": ("i", "sync_rst"),
            "ready": ("i", 1), "tx_idle": ("o", host_tx_idle),
            "tx_cominit_stb": ("o", down.tx_cominit_stb), "tx_cominit_ack": ("i", down.tx_cominit_ack),
            "tx_comwake_stb": ("o", down.tx_comwake_stb), "tx_comwake_ack": ("i", down.tx_comwake_ack),
            "rx_idle": ("i", up.rx_idle), "rx_cominit_stb": ("i", up.rx_cominit_stb),
            "rx_comwake_stb": ("i", up.rx_comwake_stb),
            "tx_data": ("o", host_tx_data), "tx_charisk": ("o", host_tx_charisk), "tx_valid": ("o", Signal()),
            "tx_ready": ("i", 1),
            "rx_data": ("i", up.rx_data), "rx_charisk": ("i", up.rx_charisk), "rx_valid": ("i", 1),
            "sink_valid": ("i", self.host_sink_valid), "sink_ready": ("o", self.host_sink_ready),
            "sink_data": ("i", self.host_sink_data), "sink_last": ("i", self.host_sink_last),
            "source_valid": ("o", self.host_source_valid), "source_ready": ("i", self.host_source_ready),
            "source_data": ("o", self.host_source_data), "source_last": ("o", self.host_source_last),
            "source_error": ("o", self.host_source_error),
            "phy_ready": ("o", self.host_phy_ready), "tx_result_valid": ("o", self.host_tx_result_valid),
            "tx_result_ok": ("o", self.host_tx_result_ok),
        }
        kwargs = {}
        for role, (direction, value) in conns.items():
            if isinstance(value, str) and value == "sync_clk":
                value = ClockSignal()
            elif isinstance(value, str) and value == "sync_rst":
                value = ResetSignal() | self.host_rst
            kwargs[f"{direction}_{p[role]}"] = value
        m.submodules.host = Instance(self._host_module, **kwargs)
        m.d.comb += [down.tx_data.eq(host_tx_data), down.tx_charisk.eq(host_tx_charisk),
                     down.tx_idle.eq(host_tx_idle)]
        return m
