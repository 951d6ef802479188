"""LiteSATA's host side, as the test's far end: its PHY controller and datapath
(litesata.phy.ctrl / datapath) and its link layer (litesata.core.link), with
a transceiver port of its own in place of a vendor transceiver, as Verilog.

The wrapper is thin and changes nothing in LiteSATA:

* ``clk_freq`` is a small nominal frequency (``HOST_CLK_FREQ``), so the PHY
  controller's timers (10 ms retry, 873 us ALIGN wait, 5 ms stability) are a
  few hundred or thousand cycles, not millions: the cable model moves OOB
  bursts in tens of cycles, far faster than a line does.
* the transceiver clock domains (sata_tx, sata_rx) run on the system clock.
* ``tx_result`` taps the link's transmit state machine: the R_OK/R_ERR that
  ends a frame the host sent (LiteSATA's link does not report it upward).
"""

from __future__ import annotations

from pathlib import Path

from migen import ClockDomain, ClockSignal, Module, ResetSignal, Signal
from migen.fhdl import verilog

from litesata.common import phy_description, primitives
from litesata.core.link import LiteSATALink
from litesata.phy.ctrl import LiteSATAPHYCtrl
from litesata.phy.datapath import LiteSATAPHYDatapath
from litex.soc.interconnect import stream

HOST_CLK_FREQ = 200e3   # nominal: 1000-cycle stability wait, 175-cycle ALIGN wait, 2000-cycle retry


class _Transceiver:
    """The attributes LiteSATA's PHY controller and datapath use of a transceiver."""

    data_width = 32

    def __init__(self):
        for name in ("ready", "tx_idle", "tx_polarity", "tx_cominit_stb", "tx_cominit_ack", "tx_comwake_stb",
                     "tx_comwake_ack", "rx_idle", "rx_cdrhold", "rx_polarity", "rx_cominit_stb", "rx_comwake_stb"):
            setattr(self, name, Signal(name=name))
        self.sink = stream.Endpoint(phy_description(32))     # to the line
        self.source = stream.Endpoint(phy_description(32))   # from the line


class _Crg:
    def __init__(self):
        self.tx_reset = Signal()
        self.rx_reset = Signal()


class _Phy(Module):
    def __init__(self, datapath):
        self.sink, self.source = datapath.sink, datapath.source


class LiteSATAHost(Module):
    def __init__(self):
        self.clock_domains.cd_sys = ClockDomain()
        self.clock_domains.cd_sata_tx = ClockDomain()
        self.clock_domains.cd_sata_rx = ClockDomain()
        for cd in (self.cd_sata_tx, self.cd_sata_rx):
            self.comb += [cd.clk.eq(ClockSignal()), cd.rst.eq(ResetSignal())]

        self.trx = trx = _Transceiver()
        self.submodules.ctrl = ctrl = LiteSATAPHYCtrl(trx, _Crg(), HOST_CLK_FREQ)
        self.submodules.datapath = datapath = LiteSATAPHYDatapath(trx, ctrl)
        self.comb += [ctrl.rx_idle.eq(datapath.rx_idle), ctrl.misalign.eq(datapath.misalign)]
        self.submodules.link = link = LiteSATALink(_Phy(datapath))
        self.sink, self.source = link.sink, link.source
        self.phy_ready = ctrl.ready

        self.tx_result_valid = Signal()
        self.tx_result_ok = Signal()
        from_rx = link.tx.from_rx
        answered = from_rx.primitive_valid & ((from_rx.primitive == primitives["R_OK"]) |
                                              (from_rx.primitive == primitives["R_ERR"]))
        self.comb += [
            self.tx_result_valid.eq(link.tx.fsm.ongoing("WTRM") & answered),
            self.tx_result_ok.eq(from_rx.primitive == primitives["R_OK"]),
        ]

    def ios(self):
        t = self.trx
        return {
            t.ready, t.tx_idle, t.tx_cominit_stb, t.tx_cominit_ack, t.tx_comwake_stb, t.tx_comwake_ack,
            t.rx_idle, t.rx_cominit_stb, t.rx_comwake_stb,
            t.sink.data, t.sink.charisk, t.sink.valid, t.sink.ready,
            t.source.data, t.source.charisk, t.source.valid,
            self.sink.valid, self.sink.ready, self.sink.data, self.sink.last,
            self.source.valid, self.source.ready, self.source.data, self.source.last, self.source.error,
            self.phy_ready, self.tx_result_valid, self.tx_result_ok,
            self.cd_sys.clk, self.cd_sys.rst,
        }


class _SameClockResetSync:
    """The datapath's clock-domain crossings synchronise their reset into the other domain; here
    every domain is the system clock, so the reset passes straight through."""

    @staticmethod
    def lower(dr):
        module = Module()
        module.comb += dr.cd.rst.eq(dr.async_reset)
        return module


def host_verilog(out_dir: Path, name: str = "litesata_host") -> tuple[Path, dict[str, str]]:
    """Convert to ``out_dir/<name>.v``; returns the path and the port names keyed by role."""
    from rtl.build_cache import write_if_changed

    host = LiteSATAHost()
    t = host.trx
    roles = {
        "clk": host.cd_sys.clk, "rst": host.cd_sys.rst,
        "ready": t.ready, "tx_idle": t.tx_idle, "tx_cominit_stb": t.tx_cominit_stb,
        "tx_cominit_ack": t.tx_cominit_ack, "tx_comwake_stb": t.tx_comwake_stb, "tx_comwake_ack": t.tx_comwake_ack,
        "rx_idle": t.rx_idle, "rx_cominit_stb": t.rx_cominit_stb, "rx_comwake_stb": t.rx_comwake_stb,
        "tx_data": t.sink.data, "tx_charisk": t.sink.charisk, "tx_valid": t.sink.valid, "tx_ready": t.sink.ready,
        "rx_data": t.source.data, "rx_charisk": t.source.charisk, "rx_valid": t.source.valid,
        "sink_valid": host.sink.valid, "sink_ready": host.sink.ready, "sink_data": host.sink.data,
        "sink_last": host.sink.last,
        "source_valid": host.source.valid, "source_ready": host.source.ready, "source_data": host.source.data,
        "source_last": host.source.last, "source_error": host.source.error,
        "phy_ready": host.phy_ready, "tx_result_valid": host.tx_result_valid, "tx_result_ok": host.tx_result_ok,
    }
    from migen.genlib.resetsync import AsyncResetSynchronizer

    out = verilog.convert(host, ios=set(roles.values()), name=name,
                          special_overrides={AsyncResetSynchronizer: _SameClockResetSync})
    names = {role: out.ns.get_name(sig) for role, sig in roles.items()}
    path = write_if_changed(Path(out_dir) / f"{name}.v", str(out))
    return path, names
