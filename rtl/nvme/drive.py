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
from amaranth.lib.wiring import In, Out

from atomflash import spec
from rtl.ftl.core import FtlCore
from rtl.lib import wishbone

from .controller import NvmeController

__all__ = ["NvmeDrive"]

#: the core's build parameters a drive answers for, so what builds around a core (soc/ftl_bridge.py)
#: builds around a drive
CORE_PARAMETERS = ("alloc", "cache_pages", "channels", "fw_slot", "limits", "map_segments", "max_appends",
                   "max_open_tx", "max_pending", "params", "profile", "queue_pairs", "slot_words", "slots", "ways",
                   "buf_addr_width", "queue_ids")


class NvmeDrive(wiring.Component):
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
        members = {}
        for name, member in self.core.signature.members.items():
            if name in ("stream_cmd", "stream_cpl", "mem"):
                continue
            members[name] = member
        for name in ("bar", "fw", "fw_irq", "dma", "msix"):
            members[f"nvme_{name}"] = self.nvme.signature.members[name]
        members["mem"] = Out(wishbone.Signature(addr_width=30, data_width=32, burst=True))
        super().__init__(members)

    def __getattr__(self, name):
        if name in CORE_PARAMETERS:
            return getattr(self.core, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

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
        for name, member in self.core.signature.members.items():
            if name in ("stream_cmd", "stream_cpl", "mem"):
                continue
            ours, theirs = getattr(self, name), getattr(core, name)
            if member.is_port:
                if member.flow == In:
                    m.d.comb += theirs.eq(ours)
                else:
                    m.d.comb += ours.eq(theirs)
            else:
                self._pass(m, member, ours, theirs)
        return m

    @staticmethod
    def _pass(m, member, ours, theirs):
        """A sub-interface of the core (a stream, a Wishbone port, an array of them), as it is."""
        if isinstance(ours, (list, tuple)):
            for a, b in zip(ours, theirs):
                NvmeDrive._pass(m, member, a, b)
        elif member.flow == In:
            wiring.connect(m, wiring.flipped(ours), theirs)
        else:
            wiring.connect(m, theirs, wiring.flipped(ours))
