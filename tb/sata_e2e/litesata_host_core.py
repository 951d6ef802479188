"""LiteSATA's whole host core as the test's far end: its PHY controller and datapath on a transceiver
port of its own (as ``tb/sata_link/litesata_host.py``), then ``LiteSATACore`` (link, transport,
command), ``LiteSATACrossbar``, and on three crossbar ports the frontends a LiteSATA user has:
``LiteSATAIdentify`` and the BIST generator and checker (the non-CSR units), as Verilog.

Nothing in LiteSATA is changed; the frontends' control and result signals and the identify FIFO's
source are flat ports (``ROLES``).
"""

from __future__ import annotations

from pathlib import Path

from migen import ClockDomain, ClockSignal, Module, ResetSignal
from migen.fhdl import verilog
from migen.genlib.resetsync import AsyncResetSynchronizer

from litesata.core import LiteSATACore
from litesata.frontend.arbitration import LiteSATACrossbar
from litesata.frontend.bist import LiteSATABISTChecker, LiteSATABISTGenerator
from litesata.frontend.identify import LiteSATAIdentify
from litesata.phy.ctrl import LiteSATAPHYCtrl
from litesata.phy.datapath import LiteSATAPHYDatapath
from tb.sata_link.litesata_host import HOST_CLK_FREQ, _Crg, _Phy, _SameClockResetSync, _Transceiver


class LiteSATAHostCore(Module):
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
        self.submodules.core = core = LiteSATACore(_Phy(datapath))
        self.submodules.crossbar = crossbar = LiteSATACrossbar(core)
        self.submodules.identify = LiteSATAIdentify(crossbar.get_port())
        self.submodules.generator = LiteSATABISTGenerator(crossbar.get_port())
        self.submodules.checker = LiteSATABISTChecker(crossbar.get_port())
        self.phy_ready = ctrl.ready

    def roles(self):
        t, idf = self.trx, self.identify
        roles = {
            "clk": self.cd_sys.clk, "rst": self.cd_sys.rst,
            "ready": t.ready, "tx_idle": t.tx_idle, "tx_cominit_stb": t.tx_cominit_stb,
            "tx_cominit_ack": t.tx_cominit_ack, "tx_comwake_stb": t.tx_comwake_stb,
            "tx_comwake_ack": t.tx_comwake_ack,
            "rx_idle": t.rx_idle, "rx_cominit_stb": t.rx_cominit_stb, "rx_comwake_stb": t.rx_comwake_stb,
            "tx_data": t.sink.data, "tx_charisk": t.sink.charisk, "tx_valid": t.sink.valid, "tx_ready": t.sink.ready,
            "rx_data": t.source.data, "rx_charisk": t.source.charisk, "rx_valid": t.source.valid,
            "phy_ready": self.phy_ready,
            "identify_start": idf.start, "identify_done": idf.done,
            "identify_valid": idf.source.valid, "identify_ready": idf.source.ready,
            "identify_data": idf.source.data,
        }
        for prefix, unit in (("gen", self.generator), ("chk", self.checker)):
            for name in ("start", "sector", "count", "random", "done", "aborted", "errors"):
                roles[f"{prefix}_{name}"] = getattr(unit, name)
        return roles


#: the roles the host's Verilog ports play, with their direction from the host's side
HOST_INPUTS = {"clk", "rst", "ready", "tx_cominit_ack", "tx_comwake_ack", "rx_idle", "rx_cominit_stb",
               "rx_comwake_stb", "tx_ready", "rx_data", "rx_charisk", "rx_valid", "identify_start",
               "identify_ready", "gen_start", "gen_sector", "gen_count", "gen_random", "chk_start", "chk_sector",
               "chk_count", "chk_random"}


def host_core_verilog(out_dir: Path, name: str = "litesata_host_core") -> tuple[Path, dict[str, str]]:
    """Convert to ``out_dir/<name>.v``; returns the path and the port names keyed by role."""
    from rtl.build_cache import write_if_changed

    host = LiteSATAHostCore()
    roles = host.roles()
    out = verilog.convert(host, ios=set(roles.values()), name=name,
                          special_overrides={AsyncResetSynchronizer: _SameClockResetSync})
    names = {role: out.ns.get_name(sig) for role, sig in roles.items()}
    path = write_if_changed(Path(out_dir) / f"{name}.v", str(out))
    return path, names
