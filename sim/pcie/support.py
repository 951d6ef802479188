"""LitePCIe's UltraScale+ PHY without the hard block, for cocotbext-pcie.

``USPPCIEPHY`` instantiates ``pcie_support`` (``litepcie/phy/xilinx_usp/
pcie_usp_support.v``): the ``pcie4_uscale_plus`` hard block, the GT reference
clock buffer, and four adapters between the hard block's AXI-Stream
descriptors and LitePCIe's TLP streams.  :class:`SimPcieSupport` is that
wrapper minus the hard block: it instantiates the same four adapter modules
(LitePCIe's Verilog, :func:`adapter_sources`) and turns the hard block's side
of them, and the ``cfg_*`` wires LitePCIe reads, into :class:`HardBlockPorts`
-- signals named and sized as cocotbext-pcie's ``UltraScalePlusPcieDevice``
takes them, which the simulation top exports as its ports.  The model then
owns the link: it clocks ``user_clk``, drives ``user_reset`` and
``user_lnk_up``, presents the configuration space, and moves TLPs between the
root complex and the four streams.

:class:`SimUSPPCIEPHY` is ``USPPCIEPHY`` itself (its datapaths, configuration
decoding and status registers), built on stand-in pads, with the reference
clock buffer dropped and ``pcie_support`` replaced by :class:`SimPcieSupport`.
It adds what the board ``pcie_support`` does not export: the MSI-X enable and
function-mask bits (``msix_enable``, ``msix_function_mask``), which
``soc.pcie.PcieMSIX`` honours.

Width notes (256-bit interface): the adapters' tuser buses are 60 (RQ), 85
(CQ, RC) and 33 (CC) bits; the UltraScale+ hard block's are 62, 88, 75 and
33.  The two extra RQ bits are zero and the CQ adapter takes the low 85; the
RC adapter reads only byte enables and discontinue (bits 31:0 and 42), so
the 75-bit port feeds it zero-extended.  The hard block's CQ/RC tready
inputs are 22 bits wide with only bit 0 meaningful, and the adapters' four;
the ports are one bit, as the model drives and reads them.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from migen import Instance, Record, Replicate, Signal

from litex.gen import LiteXModule
from litex.gen.context import LiteXContext

import litepcie
from litepcie.phy.usppciephy import USPPCIEPHY

from soc.pcie import PcieConfig

ADAPTER_DIR = Path(os.path.dirname(litepcie.__file__)) / "phy" / "xilinx_usp"

#: a part of the UltraScale+ family: LitePCIe's packetizer reads the device name to pick 4-DW
#: request headers at 256 bits, which the 256-bit RQ adapter requires
SIM_DEVICE = "xcvu9p-flga2104-2L-e"


def adapter_sources(data_width: int) -> list[Path]:
    """LitePCIe's Verilog that :class:`SimPcieSupport` instantiates."""
    names = ["axis_iff.v"] + [f"{a}_{data_width}b.v" for a in
                              ("s_axis_rq_adapt", "m_axis_rc_adapt", "m_axis_cq_adapt", "s_axis_cc_adapt")]
    return [ADAPTER_DIR / n for n in names]


def user_widths(data_width: int) -> dict[str, int]:
    """tuser widths of the UltraScale+ hard block's four interfaces."""
    if data_width == 512:
        return dict(rq=137, rc=161, cq=183, cc=81)
    return dict(rq=62, rc=75, cq=88, cc=33)


def hard_block_ports(data_width: int) -> list[tuple[str, int, str]]:
    """``(name, width, direction)`` of the simulation top's ports: the hard block's side of the
    adapters and the cfg wires.  ``"in"``: driven by the model; ``"out"``: by the gateware."""
    dw, kw, uw = data_width, data_width // 32, user_widths(data_width)
    ins = [
        ("user_clk", 1), ("user_reset", 1), ("user_lnk_up", 1),
        ("s_axis_rq_tready", 1),
        ("m_axis_rc_tdata", dw), ("m_axis_rc_tkeep", kw), ("m_axis_rc_tlast", 1),
        ("m_axis_rc_tvalid", 1), ("m_axis_rc_tuser", uw["rc"]),
        ("m_axis_cq_tdata", dw), ("m_axis_cq_tkeep", kw), ("m_axis_cq_tlast", 1),
        ("m_axis_cq_tvalid", 1), ("m_axis_cq_tuser", uw["cq"]),
        ("s_axis_cc_tready", 1),
        ("pcie_cq_np_req_count", 6),
        ("cfg_phy_link_down", 1), ("cfg_phy_link_status", 2), ("cfg_negotiated_width", 3),
        ("cfg_current_speed", 2), ("cfg_max_payload", 3), ("cfg_max_read_req", 3),
        ("cfg_function_status", 16), ("cfg_ltssm_state", 6),
        ("cfg_interrupt_msi_enable", 4),
        ("cfg_interrupt_msix_enable", 4), ("cfg_interrupt_msix_mask", 4),
    ]
    outs = [
        ("s_axis_rq_tdata", dw), ("s_axis_rq_tkeep", kw), ("s_axis_rq_tlast", 1),
        ("s_axis_rq_tvalid", 1), ("s_axis_rq_tuser", uw["rq"]),
        ("m_axis_rc_tready", 1), ("m_axis_cq_tready", 1),
        ("s_axis_cc_tdata", dw), ("s_axis_cc_tkeep", kw), ("s_axis_cc_tlast", 1),
        ("s_axis_cc_tvalid", 1), ("s_axis_cc_tuser", uw["cc"]),
        ("pcie_cq_np_req", 2),
    ]
    return [(n, w, "in") for n, w in ins] + [(n, w, "out") for n, w in outs]


class HardBlockPorts:
    """The ports of :func:`hard_block_ports` as signals: ``inputs`` (driven by the model) and
    ``outputs`` (by the gateware), each also an attribute of its name."""

    def __init__(self, data_width: int):
        self.inputs, self.outputs = [], []
        for name, width, direction in hard_block_ports(data_width):
            s = Signal(width, name=name)
            setattr(self, name, s)
            (self.inputs if direction == "in" else self.outputs).append(s)

    def ios(self) -> set:
        return set(self.inputs) | set(self.outputs)


class SimPcieSupport(LiteXModule):
    """``pcie_support`` without the hard block (see the module docstring).

    ``params``: the PHY's ``pcie_phy_params`` -- the ports ``USPPCIEPHY``
    connects to ``pcie_support`` -- of which the AXI-Stream, clock/reset and
    status ones are served here; the rest (serial lanes, reference clock,
    configuration management, messages, legacy interrupts, MSI) have no
    counterpart in the model and stay unconnected."""

    def __init__(self, params: dict, hard: HardBlockPorts, data_width: int):
        dw = data_width
        p = params

        # Clock, reset, link ---------------------------------------------------------------------
        self.comb += [
            p["o_user_clk_out"].eq(hard.user_clk),
            p["o_user_reset_out"].eq(hard.user_reset),
            p["o_user_lnk_up"].eq(hard.user_lnk_up),
        ]

        # The four adapters (LitePCIe's Verilog) -----------------------------------------------------
        common = dict(p_DATA_WIDTH=dw, p_KEEP_WIDTH=dw // 8,
                      i_user_clk=hard.user_clk, i_user_reset=hard.user_reset)

        rq_tuser = Signal(60)
        self.specials += Instance("s_axis_rq_adapt", **common,
            i_s_axis_rq_tdata=p["i_s_axis_rq_tdata"], i_s_axis_rq_tkeep=p["i_s_axis_rq_tkeep"],
            i_s_axis_rq_tlast=p["i_s_axis_rq_tlast"], o_s_axis_rq_tready=p["o_s_axis_rq_tready"],
            i_s_axis_rq_tuser=p["i_s_axis_rq_tuser"], i_s_axis_rq_tvalid=p["i_s_axis_rq_tvalid"],
            o_s_axis_rq_tdata_a=hard.s_axis_rq_tdata, o_s_axis_rq_tkeep_a=hard.s_axis_rq_tkeep,
            o_s_axis_rq_tlast_a=hard.s_axis_rq_tlast, i_s_axis_rq_tready_a=hard.s_axis_rq_tready,
            o_s_axis_rq_tuser_a=rq_tuser, o_s_axis_rq_tvalid_a=hard.s_axis_rq_tvalid)
        self.comb += hard.s_axis_rq_tuser.eq(rq_tuser)

        rc_tready = Signal(4)
        rc_tuser = Signal(85)
        self.specials += Instance("m_axis_rc_adapt", **common,
            o_m_axis_rc_tdata=p["o_m_axis_rc_tdata"], o_m_axis_rc_tkeep=p["o_m_axis_rc_tkeep"],
            o_m_axis_rc_tlast=p["o_m_axis_rc_tlast"], i_m_axis_rc_tready=_tready4(p["i_m_axis_rc_tready"]),
            o_m_axis_rc_tuser=p["o_m_axis_rc_tuser"], o_m_axis_rc_tvalid=p["o_m_axis_rc_tvalid"],
            i_m_axis_rc_tdata_a=hard.m_axis_rc_tdata, i_m_axis_rc_tkeep_a=hard.m_axis_rc_tkeep,
            i_m_axis_rc_tlast_a=hard.m_axis_rc_tlast, o_m_axis_rc_tready_a=rc_tready,
            i_m_axis_rc_tuser_a=rc_tuser, i_m_axis_rc_tvalid_a=hard.m_axis_rc_tvalid)
        self.comb += [hard.m_axis_rc_tready.eq(rc_tready[0]), rc_tuser.eq(hard.m_axis_rc_tuser)]

        cq_tready = Signal(4)
        cq_tuser = Signal(85)
        self.specials += Instance("m_axis_cq_adapt", **common,
            o_m_axis_cq_tdata=p["o_m_axis_cq_tdata"], o_m_axis_cq_tkeep=p["o_m_axis_cq_tkeep"],
            o_m_axis_cq_tlast=p["o_m_axis_cq_tlast"], i_m_axis_cq_tready=_tready4(p["i_m_axis_cq_tready"]),
            o_m_axis_cq_tuser=p["o_m_axis_cq_tuser"], o_m_axis_cq_tvalid=p["o_m_axis_cq_tvalid"],
            i_m_axis_cq_tdata_a=hard.m_axis_cq_tdata, i_m_axis_cq_tkeep_a=hard.m_axis_cq_tkeep,
            i_m_axis_cq_tlast_a=hard.m_axis_cq_tlast, o_m_axis_cq_tready_a=cq_tready,
            i_m_axis_cq_tuser_a=cq_tuser, i_m_axis_cq_tvalid_a=hard.m_axis_cq_tvalid)
        self.comb += [hard.m_axis_cq_tready.eq(cq_tready[0]), cq_tuser.eq(hard.m_axis_cq_tuser)]

        self.specials += Instance("s_axis_cc_adapt", **common,
            i_s_axis_cc_tdata=p["i_s_axis_cc_tdata"], i_s_axis_cc_tkeep=p["i_s_axis_cc_tkeep"],
            i_s_axis_cc_tlast=p["i_s_axis_cc_tlast"], o_s_axis_cc_tready=p["o_s_axis_cc_tready"],
            i_s_axis_cc_tuser=p["i_s_axis_cc_tuser"], i_s_axis_cc_tvalid=p["i_s_axis_cc_tvalid"],
            o_s_axis_cc_tdata_a=hard.s_axis_cc_tdata, o_s_axis_cc_tkeep_a=hard.s_axis_cc_tkeep,
            o_s_axis_cc_tlast_a=hard.s_axis_cc_tlast, i_s_axis_cc_tready_a=hard.s_axis_cc_tready,
            o_s_axis_cc_tuser_a=hard.s_axis_cc_tuser, o_s_axis_cc_tvalid_a=hard.s_axis_cc_tvalid)

        # Completer request credits --------------------------------------------------------------
        self.comb += hard.pcie_cq_np_req.eq(p["i_pcie_cq_np_req"])

        # Status the PHY reads -------------------------------------------------------------------
        self.comb += [
            p["o_cfg_phy_link_down"].eq(hard.cfg_phy_link_down),
            p["o_cfg_phy_link_status"].eq(hard.cfg_phy_link_status),
            p["o_cfg_negotiated_width"].eq(hard.cfg_negotiated_width),
            p["o_cfg_current_speed"].eq(hard.cfg_current_speed),
            p["o_cfg_max_payload"].eq(hard.cfg_max_payload),
            p["o_cfg_max_read_req"].eq(hard.cfg_max_read_req),
            p["o_cfg_function_status"].eq(hard.cfg_function_status),
            p["o_cfg_ltssm_state"].eq(hard.cfg_ltssm_state),
            p["o_cfg_interrupt_msi_enable"].eq(hard.cfg_interrupt_msi_enable[0]),
            # MSI (not MSI-X) is not modelled here: a message LitePCIe raises on phy.msi
            # is never acknowledged.  This endpoint uses MSI-X.
            p["o_cfg_interrupt_msi_sent"].eq(0),
            p["o_cfg_interrupt_msi_fail"].eq(0),
        ]


def _tready4(sig):
    """A one-bit tready widened to the adapters' four-bit port (the hard block reads bit 0)."""
    return Replicate(sig, 4)


class _StandInPlatform:
    """What ``USPPCIEPHY.__init__`` asks of a platform (a timing constraint on the reference clock)
    and LitePCIe's packetizer of ``LiteXContext.platform`` (the part's name)."""

    device = SIM_DEVICE

    def add_period_constraint(self, *args, **kwargs):
        pass


@contextmanager
def ultrascale_plus_context():
    """Build the endpoint inside this: ``LiteXContext.platform`` names an UltraScale+ part (LitePCIe
    reads it when building the packetizer) and is put back afterwards."""
    saved = LiteXContext.platform
    LiteXContext.platform = _StandInPlatform()
    try:
        yield
    finally:
        LiteXContext.platform = saved


class SimUSPPCIEPHY(USPPCIEPHY):
    """``USPPCIEPHY`` with ``pcie_support`` replaced by :class:`SimPcieSupport`.

    Build it, and the endpoint on it, inside :func:`ultrascale_plus_context`.
    Built with ``cd="pcie"``: the TLP core runs on the model's user clock
    (the simulation top drives ``sys`` from it), so LitePCIe's datapaths are
    direct connections.  ``hard`` holds the ports for the model."""

    def __init__(self, config: PcieConfig):
        device = getattr(LiteXContext.platform, "device", "") or ""
        assert device[:4] in ("xcku", "xcvu", "xczu", "xcau"), \
            f"LiteXContext.platform is {device!r}: build inside ultrascale_plus_context() " \
            "(the 256-bit UltraScale+ request adapter needs LitePCIe's 4-dword headers)"
        n = config.nlanes
        pads = Record([("clk_p", 1), ("clk_n", 1), ("tx_p", n), ("tx_n", n), ("rx_p", n), ("rx_n", n)])
        USPPCIEPHY.__init__(self, _StandInPlatform(), pads, speed=config.speed, data_width=config.data_width,
                            cd="pcie", bar0_size=config.bar0_size)
        # no GT reference clock: drop its buffer
        self._fragment.specials = {s for s in self._fragment.specials
                                   if not (isinstance(s, Instance) and s.of == "IBUFDS_GTE4")}
        self.hard = HardBlockPorts(config.data_width)
        self.msix_enable = self.hard.cfg_interrupt_msix_enable[0]
        self.msix_function_mask = self.hard.cfg_interrupt_msix_mask[0]

    def do_finalize(self):
        # where USPPCIEPHY instantiates pcie_support (and adds the hard block's sources), from the
        # same parameters: whoever builds on the PHY may still have changed them
        self.support = SimPcieSupport(self.pcie_phy_params, self.hard, self.data_width)
