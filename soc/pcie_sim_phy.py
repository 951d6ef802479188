"""A PCIe PHY for the full SoC simulation (litex_sim): TLP streams on simulator pads.

Under cocotb the endpoint sits on LitePCIe's UltraScale+ PHY with the hard block replaced by
cocotbext-pcie's model (``sim/pcie``).  In the full SoC simulation -- litex_sim running the RISC-V
firmware, reached by the host library over TCP -- there is no cocotb and no model of a hard block;
what the endpoint needs there is a link to a root complex that lives in the host's Python process.
:class:`SimPciePHY` is that link's device end.  It is what a LitePCIe PHY is to
``LitePCIeEndpoint`` (two TLP streams of ``phy_layout``, ``data_width``, ``bar0_mask``, ``id``,
``endianness``, the negotiated ``max_payload_size``/``max_request_size``) and what
:class:`soc.pcie.PcieEndpoint` additionally reads of the UltraScale+ PHY (``_link_status``, the
``cfg_function_status`` word through ``pcie_phy_params``, the request stream ``s_axis_rq`` its
``RequestKeep`` watches, the MSI-X enable and function-mask bits), with the other side of both
streams and the configuration bits as pads of the simulation platform (:func:`sim_pads`).  The
litex_sim module ``soc/pcie2tcp.c`` drives them: it carries whole TLPs between the pads and the
host's root complex (``atomflash.pcie_link.SimPcieLink``) and paces them at a modelled link rate.

**Width: 64 bits.**  LitePCIe's 64-bit TLP framing (the header inserter and extracter every
7-series PHY uses) puts a TLP's dwords back to back on the stream, header first, dword 0 in bits
31:0 of the first beat; nothing else between the TLP core and the pads, and the module moves whole
dwords.  ``soc.pcie`` was written for 256 bits; at 64 it holds too: ``HostDMA`` cuts transfers at
64-bit-word boundaries (a transfer of more than one TLP must start on an 8-byte boundary),
``HostDmaPort`` realigns onto 64-bit words (a head of at most one dword, a tail of at most one),
and ``RequestKeep``'s byte enables are computed and ignored (the module takes the TLP's length
from its header).  At 64 bits LitePCIe's packetizer forms 4-dword request headers only for
addresses above 4 GiB (3-dword ones below, as a 7-series part does), and its 64-bit header
extracter expects the host's TLPs with 3-dword headers (32-bit BAR0, completions): the root
complex sends no others.

**Streams.**  Little-endian (``endianness = "little"``): a header dword is its numeric value, a
payload dword holds the byte of the lowest address in bits 7:0, as host memory lays it out.  Both
directions pass a register here (``stream.PipeValid``), so ``tx_valid``/``tx_data`` and
``rx_ready`` never depend combinationally on what the module drives in the same cycle: the module,
ticking at the rising edge, sets its side for the cycle and knows at once whether a beat moves.

**Clock.**  Everything runs in ``sys``; the ``pcie`` domain ``PcieEndpoint`` puts ``RequestKeep``
in is ``sys`` under another name, as the UltraScale+ simulation builds it (``cd="pcie"``).

**Configuration space is not simulated.**  No enumeration: BAR0 decodes whatever address the host
uses (LitePCIe masks it with ``bar0_mask``), the function's ID is fixed (:data:`SIM_DEVICE_ID`),
and what a root complex would program into the Command and Device Control registers and the MSI-X
capability -- bus master enable, max payload and read request sizes, MSI-X enable and function
mask -- arrives on pads the module drives from its configuration (set by the host over the socket).
"""

from __future__ import annotations

from migen import ClockDomain, ClockSignal, ResetSignal, Signal

from litex.build.generic_platform import Pins, Subsignal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from litepcie.common import get_bar_mask, phy_layout

from .pcie import PcieConfig

DATA_WIDTH = 64
#: the function's bus/device/function as the module's root complex numbers it (bus 1, device 0, function 0)
SIM_DEVICE_ID = 0x0100

#: ``(pad, width, direction)``: ``"out"`` driven by the gateware, ``"in"`` by the litex_sim module
PADS = [
    ("tx_valid", 1, "out"), ("tx_ready", 1, "in"), ("tx_last", 1, "out"), ("tx_data", DATA_WIDTH, "out"),
    ("rx_valid", 1, "in"), ("rx_ready", 1, "out"), ("rx_last", 1, "in"), ("rx_data", DATA_WIDTH, "in"),
    ("link_up", 1, "in"), ("bus_master", 1, "in"), ("msix_enable", 1, "in"), ("msix_mask", 1, "in"),
    ("max_payload", 16, "in"), ("max_read_request", 16, "in"),
]


def sim_pads(name: str = "pcie_sim", index: int = 0):
    """The platform resource the PHY takes (``platform.add_extension([sim_pads()])``)."""
    return (name, index, *(Subsignal(n, Pins(w)) for n, w, _ in PADS))


class _LinkStatus:
    """What ``PcieEndpoint`` reads of a LitePCIe PHY's ``_link_status`` CSR: ``fields.status``."""

    def __init__(self, link_up):
        self.fields = type("fields", (), {"status": link_up})()


class SimPciePHY(LiteXModule):
    """The device end of the simulated link (see the module docstring); ``pads`` from :func:`sim_pads`."""

    endianness = "little"
    qword_aligned = False

    def __init__(self, pads, config: PcieConfig = PcieConfig(data_width=DATA_WIDTH)):
        assert config.data_width == DATA_WIDTH, "the simulation PHY is 64 bits wide"
        self.sink = stream.Endpoint(phy_layout(DATA_WIDTH))     # TLPs to the host
        self.source = stream.Endpoint(phy_layout(DATA_WIDTH))   # TLPs from the host

        self.data_width = DATA_WIDTH
        self.bar0_size = config.bar0_size
        self.bar0_mask = get_bar_mask(config.bar0_size)
        self.id = Signal(16, reset=SIM_DEVICE_ID)
        self.max_payload_size = Signal(16)
        self.max_request_size = Signal(16)
        self.link_up = Signal()
        self.msix_enable = Signal()
        self.msix_function_mask = Signal()
        self._link_status = _LinkStatus(self.link_up)
        function_status = Signal(16)                            # bit 2: bus master enable
        # what PcieEndpoint reads and writes of the UltraScale+ PHY's hard-block parameters
        self.pcie_phy_params = {"o_cfg_function_status": function_status}
        self.s_axis_rq = self.sink                              # RequestKeep watches the request stream

        # # #

        self.cd_pcie = ClockDomain()
        self.comb += [self.cd_pcie.clk.eq(ClockSignal("sys")), self.cd_pcie.rst.eq(ResetSignal("sys"))]

        self.comb += [
            self.link_up.eq(pads.link_up),
            function_status[2].eq(pads.bus_master),
            self.msix_enable.eq(pads.msix_enable),
            self.msix_function_mask.eq(pads.msix_mask),
            self.max_payload_size.eq(pads.max_payload),
            self.max_request_size.eq(pads.max_read_request),
        ]

        # device -> host: registered towards the pads
        self.tx_buffer = tx = stream.PipeValid(phy_layout(DATA_WIDTH))
        self.comb += [
            self.sink.connect(tx.sink),
            pads.tx_valid.eq(tx.source.valid),
            pads.tx_last.eq(tx.source.last),
            pads.tx_data.eq(tx.source.dat),
            tx.source.ready.eq(pads.tx_ready),
        ]

        # host -> device: registered from the pads
        self.rx_buffer = rx = stream.PipeValid(phy_layout(DATA_WIDTH))
        self.comb += [
            rx.sink.valid.eq(pads.rx_valid),
            rx.sink.first.eq(0),
            rx.sink.last.eq(pads.rx_last),
            rx.sink.dat.eq(pads.rx_data),
            rx.sink.be.eq(2**(DATA_WIDTH // 8) - 1),
            pads.rx_ready.eq(rx.sink.ready),
            rx.source.connect(self.source),
        ]
