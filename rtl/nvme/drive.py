"""The NVMe drive: the NVMe controller in front of the FTL core, one SoC memory port.

::

    BAR0, host DMA, MSI-X ◄──► NvmeController ──core_cmd/core_cpl──► FtlCore(stream_queues) ──► NAND pins
                 firmware ──► fw (NVME_FW_REGS)  │ mem               │ mem, regs, the firmware's ports
                                                 └──► Wishbone Arbiter ◄┘ ──► mem (SoC memory)

The FTL core keeps every port it has for the firmware (free blocks, relocation, the map port, its
host-queue registers for the firmware's own commands ...), under the same names, so whatever plays
the firmware for a bare core (``tb/ftl_core``, the SoC's bridge) plays it here too.  The controller's
ports are prefixed ``nvme_``.  This module only composes.
"""

from amaranth import Module
from amaranth.lib import wiring

from atomflash import spec
from rtl.ftl.core import FtlCore
from rtl.ftl.front import CoreFront, connect_core_ports, core_members, memory_port
from rtl.lib import wishbone

from .controller import NvmeController

__all__ = ["NvmeDrive"]

class NvmeDrive(CoreFront, wiring.Component):
    """:class:`NvmeController` + :class:`FtlCore`; keyword arguments not named here go to the core.

    Parameters
    ----------
    queues : NVMe I/O queue pairs (the core gets a stream queue id for each).
    contexts : NVMe commands in flight.
    """

    def __init__(self, *, queues: int = spec.NVME.IO_QUEUES, contexts: int = 16, **core_args):
        self.core = FtlCore(stream_queues=queues, **core_args)
        self.nvme = NvmeController(queues=queues, core_queue_ids=self.core.queue_ids,
                                   block_bytes=self.core.profile.page_data, limits=self.core.limits,
                                   contexts=contexts)
        self.queues = queues
        self.staging_bytes = self.nvme.staging_bytes
        members = core_members(self.core)
        for name in ("bar", "fw", "fw_irq", "dma", "msix"):
            members[f"nvme_{name}"] = self.nvme.signature.members[name]
        members["mem"] = memory_port()
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.nvme = nvme = self.nvme
        m.submodules.membus = membus = wishbone.Arbiter(2, addr_width=30, burst=True)
        wiring.connect(m, nvme.core_cmd, core.stream_cmd)
        wiring.connect(m, core.stream_cpl, nvme.core_cpl)
        m.d.comb += nvme.capacity.eq(self.capacity)
        wiring.connect(m, core.mem, membus.initiators[0])
        wiring.connect(m, nvme.mem, membus.initiators[1])
        wiring.connect(m, membus.bus, wiring.flipped(self.mem))
        for name in ("bar", "fw", "dma"):
            port = getattr(nvme, name)
            outward = getattr(self, f"nvme_{name}")
            wiring.connect(m, wiring.flipped(outward), port) if name in ("bar", "fw") else \
                wiring.connect(m, port, wiring.flipped(outward))
        wiring.connect(m, nvme.msix, wiring.flipped(self.nvme_msix))
        m.d.comb += self.nvme_fw_irq.eq(nvme.fw_irq)
        connect_core_ports(m, self, core)
        return m
