"""The NVMe controller: BAR0 registers, queues, command translation and data movement, composed.

::

    BAR0 ─► NvmeRegisters ─doorbells─► NvmeQueueEngine ──command──┬─ I/O ──► NvmeCommandTranslator ─► FtlCore
              ▲ CC, AQA/ASQ/ACQ │ CSTS      │  ▲ completion         │             │  ▲       (core_cmd/core_cpl)
              │                 ▼           │  └── StreamMerge ◄────┼─────────────┘  │ move/moved
    firmware ─► NvmeFirmwareWindow ◄─admin──┼───────────────────────┘                │
                 (admin, queue ops, logs)   │ irq ─► msix                            ▼
                       │ move ──────────────┼──────────► RequestArbiter ─► DataMover ─► mem (staging)
                       │                    ▼                                  │
                       └ config ───► HostDmaArbiter (queue engine first) ◄─────┘ dma ─► host memory

Which work is whose is in docs/nvme.md ("Gateware and firmware"); each block's module explains it.
This module only wires them.
"""

from amaranth import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import command, spec
from rtl.host.queues import command_layout, completion_layout
from rtl.lib import wishbone
from rtl.lib.streams import RequestArbiter, StreamMerge

from .datamover import DONE as MOVED, JOB as MOVE, DataMover
from .fwwindow import NvmeFirmwareWindow
from .hostdma import HostDmaArbiter, HostDmaSignature
from .queues import NvmeQueueEngine
from .regs import NvmeRegisters
from .translate import NvmeCommandTranslator, completion_payload

__all__ = ["NvmeController"]


class NvmeController(wiring.Component):
    """An NVMe controller in front of an :class:`rtl.ftl.core.FtlCore` built with ``stream_queues=queues``.

    Parameters
    ----------
    queues, mqes : I/O queue pairs; the largest queue (CAP.MQES, 0-based).
    core_queue_ids : ``FtlCore.queue_ids``.
    block_bytes, limits : the core's block and limits.
    contexts : commands in flight (:class:`~rtl.nvme.translate.NvmeCommandTranslator`).
    list_batch : PRP list entries the data mover reads at a time.

    Ports
    -----
    bar : In(wishbone) -- BAR0 from 0 to the last doorbell (the PCIe endpoint's user region).
    fw : In(wishbone) -- ``spec.NVME_FW_REGS`` for the firmware; ``fw_irq``: something waits for it.
    dma : Out(HostDmaSignature) -- host memory.
    msix : Out(stream {vector}) -- one interrupt per completion posted on a CQ with interrupts enabled.
    mem : Out(wishbone, addr_width=30) -- SoC memory: the staging areas.
    core_cmd, core_cpl -- the FTL core's stream front end.
    capacity : In(64) -- the namespace's blocks (the core's capacity).
    """

    def __init__(self, *, queues: int = spec.NVME.IO_QUEUES, mqes: int = spec.NVME.MQES, core_queue_ids: int,
                 block_bytes: int, limits: command.StaticLimits = command.StaticLimits(), contexts: int = 16,
                 list_batch: int = 32):
        self.regs = NvmeRegisters(queues=queues, mqes=mqes)
        self.engine = NvmeQueueEngine(queues=queues)
        self.translator = NvmeCommandTranslator(queues=queues, core_queue_ids=core_queue_ids, contexts=contexts,
                                                block_bytes=block_bytes, limits=limits)
        self.window = NvmeFirmwareWindow(queues=queues)
        self.mover = DataMover(batch=list_batch)
        self.queues = queues
        #: SoC memory the staging areas need from ``staging_base``
        self.staging_bytes = self.translator.staging_bytes
        super().__init__({
            "bar": In(wishbone.Signature(addr_width=len(self.regs.bar.adr), data_width=32)),
            "fw": In(wishbone.Signature(addr_width=len(self.window.bus.adr), data_width=32)),
            "fw_irq": Out(1),
            "dma": Out(HostDmaSignature()),
            "msix": Out(stream.Signature(self.engine.irq.payload.shape())),
            "mem": Out(wishbone.Signature(addr_width=30, data_width=32, burst=True)),
            "core_cmd": Out(stream.Signature(command_layout(core_queue_ids))),
            "core_cpl": In(stream.Signature(completion_layout(core_queue_ids))),
            "capacity": In(64),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = self.regs
        m.submodules.engine = engine = self.engine
        m.submodules.translator = translator = self.translator
        m.submodules.window = window = self.window
        m.submodules.mover = mover = self.mover
        m.submodules.dma_arbiter = dma_arbiter = HostDmaArbiter(2)
        m.submodules.move_arbiter = move_arbiter = RequestArbiter(MOVE, MOVED, 2)
        m.submodules.completions = completions = StreamMerge(completion_payload(self.queues), 2)
        m.submodules.membus = membus = wishbone.Arbiter(2, addr_width=30, burst=True)

        # BAR0, CC/CSTS and the admin queues' registers
        wiring.connect(m, wiring.flipped(self.bar), regs.bar)
        wiring.connect(m, regs.doorbell, engine.doorbell)
        m.d.comb += [window.cc.eq(regs.cc), window.cc_written.eq(regs.cc_written), window.aqa.eq(regs.aqa),
                     window.asq.eq(regs.asq), window.acq.eq(regs.acq), regs.rdy.eq(window.rdy),
                     regs.cfs.eq(window.cfs), regs.shst.eq(window.shst), window.fatal.eq(engine.fatal)]
        wiring.connect(m, wiring.flipped(self.fw), window.bus)
        m.d.comb += self.fw_irq.eq(window.irq)

        # commands: admin to the firmware, I/O to the translator; both answer through the engine
        cmd = engine.command
        admin = cmd.payload.sqid == 0
        m.d.comb += [window.admin.payload.sqe.eq(cmd.payload.sqe), translator.command.payload.eq(cmd.payload),
                     window.admin.valid.eq(cmd.valid & admin), translator.command.valid.eq(cmd.valid & ~admin),
                     cmd.ready.eq(Mux(admin, window.admin.ready, translator.command.ready))]
        wiring.connect(m, window.admin_completion, completions.inputs[0])
        wiring.connect(m, translator.completion, completions.inputs[1])
        m.d.comb += [engine.completion.valid.eq(completions.output.valid),
                     completions.output.ready.eq(engine.completion.ready)]
        for name in ("sqid", "cid", "sct", "sc", "dnr", "result"):
            m.d.comb += getattr(engine.completion.payload, name).eq(getattr(completions.output.payload, name))
        wiring.connect(m, window.config, engine.config)
        wiring.connect(m, engine.config_done, window.config_done)
        wiring.connect(m, engine.doorbell_error, window.doorbell_error)
        wiring.connect(m, engine.irq, wiring.flipped(self.msix))

        # the translator's side: the core, its settings, its counters
        wiring.connect(m, translator.core_cmd, wiring.flipped(self.core_cmd))
        wiring.connect(m, wiring.flipped(self.core_cpl), translator.core_cpl)
        wiring.connect(m, translator.failed, window.failed)
        m.d.comb += [translator.capacity.eq(self.capacity), translator.staging_base.eq(window.staging_base),
                     translator.write_cache.eq(window.write_cache), window.io_idle.eq(translator.idle),
                     window.busy_queues.eq(translator.busy_queues | engine.draining),
                     window.read_commands.eq(translator.read_commands),
                     window.write_commands.eq(translator.write_commands),
                     window.blocks_read.eq(translator.blocks_read), window.blocks_written.eq(translator.blocks_written),
                     window.failed_lost.eq(translator.failed_lost)]

        # the data mover: the translator's transfers and the firmware's, one at a time
        wiring.connect(m, translator.move, move_arbiter.clients[0].request)
        wiring.connect(m, move_arbiter.clients[0].response, translator.moved)
        wiring.connect(m, window.move, move_arbiter.clients[1].request)
        wiring.connect(m, move_arbiter.clients[1].response, window.moved)
        wiring.connect(m, move_arbiter.request, mover.job)
        wiring.connect(m, mover.done, move_arbiter.response)

        # host memory (the queue engine first: the data path waits on its entries) and SoC memory
        wiring.connect(m, engine.dma, dma_arbiter.initiators[0])
        wiring.connect(m, mover.dma, dma_arbiter.initiators[1])
        wiring.connect(m, dma_arbiter.dma, wiring.flipped(self.dma))
        wishbone.connect(m, translator.mem, membus.initiators[0])      # classic: SQE fields, lists
        wiring.connect(m, mover.mem, membus.initiators[1])
        wiring.connect(m, membus.bus, wiring.flipped(self.mem))
        return m
