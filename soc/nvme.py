"""The NVMe drive's PCIe side in the SoC: the controller behind the PCIe endpoint's BAR0, DMA and MSI-X.

The FTL bridge built with ``nvme_queues`` (:class:`soc.ftl_bridge.FtlBridge`) carries the NVMe
controller (``rtl/nvme``) in front of the FTL core; its PCIe side leaves the Amaranth block as three
ports of the Verilog instance, which :class:`NvmeBar` joins to LitePCIe's endpoint
(:class:`soc.pcie.PcieEndpoint`) as the endpoint's BAR0 user block:

* ``nvme_bar``: BAR0 from offset 0 (the controller's registers and doorbells) -- the endpoint's user
  region, a 32-bit Wishbone target;
* ``nvme_dma``: the controller's host-memory requests -- :class:`soc.pcie.HostDmaPort` on the
  endpoint's :class:`~soc.pcie.HostDMA`, refused while the function's bus mastering is off;
* ``nvme_msix``: one interrupt vector per completion posted on a CQ with interrupts on -- a pulse on
  :class:`~soc.pcie.PcieMSIX`'s vector.

The PHY is the caller's: a board's hard block (:func:`soc.pcie.make_phy`) or the simulation's.
"""

from __future__ import annotations

from migen import Signal

from litex.gen import LiteXModule
from litex.soc.interconnect import wishbone

from atomflash import spec

from .pcie import HostDmaPort, PcieConfig, PcieEndpoint

__all__ = ["NvmeBar", "add_nvme_pcie", "nvme_pcie_config"]

# the Amaranth payloads' bit positions (rtl/nvme/hostdma.py: REQUEST, WORD, DONE; the MSI-X vector)
_REQ_WRITE, _REQ_ADDR, _REQ_BYTES = 0, slice(1, 65), slice(65, 78)
_WORD_DATA, _WORD_LAST, _WORD_ERROR = slice(0, 32), 32, 33


def nvme_pcie_config(queues: int, **overrides) -> PcieConfig:
    """The PCIe function an NVMe drive with ``queues`` I/O queues is: class 010802, one MSI-X vector
    for the admin CQ and one per I/O CQ."""
    return PcieConfig(**{"vendor_id": spec.NVME.VENDOR_ID, "device_id": spec.NVME.DEVICE_ID,
                         "class_code": spec.NVME.PCI_CLASS, "msix_vectors": queues + 1} | overrides)


class NvmeBar(LiteXModule):
    """The endpoint's BAR0 user block: the controller instance's ``nvme_*`` ports joined to the
    endpoint (see the module docstring).  ``params``: the instance's parameter dict (ports are
    added to it); ``queues``: the controller's I/O queues."""

    def __init__(self, endpoint: PcieEndpoint, params: dict, queues: int):
        self.bus = wishbone.Interface(data_width=32, address_width=32, addressing="word")
        self.port = port = HostDmaPort(endpoint.dma, bus_master=endpoint.bus_master_enable)

        bar = self.bus
        params.update(
            i_nvme_bar__adr=bar.adr, i_nvme_bar__dat_w=bar.dat_w, o_nvme_bar__dat_r=bar.dat_r,
            i_nvme_bar__sel=bar.sel, i_nvme_bar__cyc=bar.cyc, i_nvme_bar__stb=bar.stb, i_nvme_bar__we=bar.we,
            o_nvme_bar__ack=bar.ack, o_nvme_bar__err=bar.err)

        req_payload, wdata_payload = Signal(78), Signal(34)
        rdata_payload, done_payload = Signal(34), Signal()
        self.comb += [
            port.req.write.eq(req_payload[_REQ_WRITE]), port.req.addr.eq(req_payload[_REQ_ADDR]),
            port.req.bytes.eq(req_payload[_REQ_BYTES]),
            port.wdata.data.eq(wdata_payload[_WORD_DATA]), port.wdata.last.eq(wdata_payload[_WORD_LAST]),
            port.wdata.error.eq(wdata_payload[_WORD_ERROR]),
            rdata_payload[_WORD_DATA].eq(port.rdata.data), rdata_payload[_WORD_LAST].eq(port.rdata.last),
            rdata_payload[_WORD_ERROR].eq(port.rdata.error),
            done_payload.eq(port.done.error),
        ]
        params.update(
            o_nvme_dma__req__valid=port.req.valid, i_nvme_dma__req__ready=port.req.ready,
            o_nvme_dma__req__payload=req_payload,
            o_nvme_dma__wdata__valid=port.wdata.valid, i_nvme_dma__wdata__ready=port.wdata.ready,
            o_nvme_dma__wdata__payload=wdata_payload,
            i_nvme_dma__rdata__valid=port.rdata.valid, o_nvme_dma__rdata__ready=port.rdata.ready,
            i_nvme_dma__rdata__payload=rdata_payload,
            i_nvme_dma__done__valid=port.done.valid, o_nvme_dma__done__ready=port.done.ready,
            i_nvme_dma__done__payload=done_payload)

        # MSI-X: the controller's vector stream (always taken) as a pulse on that vector
        msix_valid, vector = Signal(), Signal(max(1, (queues).bit_length()))
        params.update(o_nvme_msix__valid=msix_valid, i_nvme_msix__ready=1, o_nvme_msix__payload=vector)
        irqs = endpoint.msix.irqs
        for v in range(len(irqs)):
            self.comb += irqs[v].eq(msix_valid & (vector == v))


def add_nvme_pcie(soc, core, phy, *, queues: int, **config) -> PcieEndpoint:
    """Join the FTL bridge instance ``core`` (:class:`soc.controller.AmaranthCore` of an
    ``FtlBridge(nvme_queues=queues)``) to a PCIe endpoint on ``phy``; returns the endpoint
    (``soc.pcie``)."""
    soc.pcie = endpoint = PcieEndpoint(phy, nvme_pcie_config(queues, **config),
                                       user=lambda ep: NvmeBar(ep, core.params, queues))
    return endpoint
