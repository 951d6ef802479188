"""Write the Verilator top of the simulated PCIe endpoint into build/.

The top (:data:`TOPLEVEL`) is ``soc.pcie.PcieEndpoint`` on
:class:`sim.pcie.support.SimUSPPCIEPHY`; its ports are the hard block's side
of LitePCIe's adapters (:class:`sim.pcie.support.HardBlockPorts`), which the
cocotb testbench hands to cocotbext-pcie's ``UltraScalePlusPcieDevice``, and
a ``soc.pcie.HostDmaPort`` brought out as ``hdp_*`` ports
(:func:`host_dma_port_ios`) for the testbench to drive as the NVMe controller
will.  ``sys`` is the model's ``user_clk``.

    .venv/bin/python -m sim.pcie.gen [--out build/pcie]

prints the Verilog sources of the top (the generated file, LitePCIe's adapter
files).  The generated text is only rewritten when it changes, so Verilator
rebuilds only when the design does.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from migen import ClockDomain, ClockSignal, ResetSignal   # noqa: E402

from litex.gen import LiteXModule                          # noqa: E402

from rtl.build_cache import write_if_changed               # noqa: E402
from sim.pcie.support import SimUSPPCIEPHY, adapter_sources, ultrascale_plus_context  # noqa: E402
from soc.pcie import HostDMA, HostDmaPort, PcieConfig, PcieEndpoint  # noqa: E402

TOPLEVEL = "atomflash_pcie_sim"
OUT_DIR = ROOT / "build" / "pcie"


def host_dma_port_ios(port: HostDmaPort) -> dict:
    """The top's ports for ``port``: ``hdp_<stream>_<field>`` (``hdp_req_addr``,
    ``hdp_rdata_ready``, ...), the names of :class:`soc.pcie.HostDmaPort`'s fields."""
    ios = {}
    for name in ("req", "wdata", "rdata", "done"):
        ep = getattr(port, name)
        fields = ["valid", "ready"] + ([] if name in ("req", "done") else ["last"])
        fields += [f[0] for f in ep.payload.layout]
        for f in fields:
            ios[f"hdp_{name}_{f}"] = getattr(ep, f)
    return ios


#: the ``hdp_*`` port names, for the testbench
HOST_DMA_PORT_NAMES = [f"hdp_{n}" for n in (
    "req_valid", "req_ready", "req_write", "req_addr", "req_bytes",
    "wdata_valid", "wdata_ready", "wdata_last", "wdata_data", "wdata_error",
    "rdata_valid", "rdata_ready", "rdata_last", "rdata_data", "rdata_error",
    "done_valid", "done_ready", "done_error")]


class PcieSimTop(LiteXModule):
    """The endpoint on the simulation PHY, ``sys`` = the model's user clock.

    Besides the endpoint (its BAR0 user region the bring-up block, which owns
    ``pcie.dma``), a second :class:`soc.pcie.HostDMA` on the same TLP core
    carries a :class:`soc.pcie.HostDmaPort` whose streams are top-level ports:
    the testbench stands in for the NVMe controller on them.  The two DMA
    engines share the crossbar as any two master ports do."""

    def __init__(self, config: PcieConfig):
        phy = SimUSPPCIEPHY(config)            # a submodule of the endpoint (LitePCIeEndpoint keeps it)
        self.pcie = PcieEndpoint(phy, config)
        self.port_dma = HostDMA(self.pcie.endpoint, data_width=phy.data_width)
        self.host_dma_port = HostDmaPort(self.port_dma, bus_master=self.pcie.bus_master_enable)
        self.cd_sys = ClockDomain()
        self.comb += [
            ClockSignal("sys").eq(ClockSignal("pcie")),
            ResetSignal("sys").eq(ResetSignal("pcie")),
        ]
        port_ios = host_dma_port_ios(self.host_dma_port)
        assert sorted(port_ios) == sorted(HOST_DMA_PORT_NAMES)
        for name, sig in port_ios.items():
            sig.name_override = name
        self.ios = phy.hard.ios() | set(port_ios.values())


def generate(config: PcieConfig = PcieConfig(), out_dir: Path = OUT_DIR) -> list[Path]:
    """Convert the top to ``out_dir/<TOPLEVEL>.v`` (memory images beside it);
    return every Verilog source Verilator needs."""
    return write_top(lambda: PcieSimTop(config), TOPLEVEL, out_dir, config.data_width)


def write_top(make_top, name: str, out_dir: Path, data_width: int) -> list[Path]:
    """Build ``make_top()`` (a Migen module on :class:`SimUSPPCIEPHY` with its ports in ``ios``) and
    convert it to module ``name`` in ``out_dir/<name>.v``, memory images beside it; return that file
    and LitePCIe's adapter sources."""
    from litex.gen.fhdl.verilog import convert

    out_dir = Path(out_dir).resolve()
    with ultrascale_plus_context():
        top = make_top()
        conv = convert(top, ios=top.ios, name=name)
    text = conv.main_source
    # LiteX stamps the date into the banner and trailer; keep the text stable so make stays cached
    text = re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", "", text)
    for file, content in conv.data_files.items():
        write_if_changed(out_dir / file, content)
        text = text.replace(f'$readmemh("{file}"', f'$readmemh("{out_dir / file}"')
    top_v = write_if_changed(out_dir / f"{name}.v", text)
    return [top_v, *adapter_sources(data_width)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (default build/pcie)")
    args = ap.parse_args(argv)
    for path in generate(out_dir=args.out):
        print(path)


if __name__ == "__main__":
    main()
