"""The FTL core in the SoC: :class:`rtl.ftl.core.FtlCore` behind one Wishbone
window, with the registers the firmware needs to own it.

The core's fast path (host queues, log writer, publisher, read path, map
cache, relocator) runs by itself; everything it leaves to the firmware enters
as plain ports (see :mod:`rtl.ftl.core`).  This bridge turns those into
registers and puts the core's NAND port for the firmware behind the same
register window the bare NAND controller has on a board
(:class:`rtl.nand.window.NandWindow`), so the firmware's NAND driver is one
driver for both:

=====================  ======================================================
offset                 what
=====================  ======================================================
``0x000`` .. ``0x0FF`` host queue registers, ``spec.HOST_REGS`` (the host's)
``0x100`` .. ``0x2FF`` FTL registers, ``spec.FTL_REGS`` (the firmware's)
``0x300`` .. ``0x3FF`` NVMe controller's firmware window, ``spec.NVME_FW_REGS``
                       (builds with ``nvme_queues``)
``NAND_OFFSET`` ..     NandWindow: descriptors and completions through the
                       core's firmware port, timing, the page buffers
                       (arbitrated with the core; only ``FW_SLOT`` is the
                       firmware's while the core runs)
=====================  ======================================================

``NAND_OFFSET`` is the NandWindow's size (a power of two), so the window is
``2 * NAND_OFFSET`` bytes.  Addresses in no block answer 0 (never hang the CPU),
and so do the host queue registers until the firmware sets
``ftl.host_enable`` after recovery: a host waits for ``hostq.id``.

The FTL registers are single-entry mailboxes for each stream the firmware
feeds (free blocks, the log's seq, relocation requests, map requests) and
the heads of those it drains (closed blocks, relocation results, pages whose
program failed): write the
arguments, then the action bit of ``ctrl``; ``status`` says when the core
took a push or when a result waits.

Port contract (:mod:`soc.controller`): ``clk``/``rst``, ``wbs_*`` (target),
``wbm_*`` (the core's initiator into SoC memory), ``irq`` (the host queues'
interrupt, a NAND completion or the NVMe controller's news for the firmware),
``nand`` (per channel the ONFI pins, DQ inputs registered once as on the
boards).

With ``nvme_queues``, the core is an :class:`rtl.nvme.drive.NvmeDrive`: the NVMe
controller in front of the FTL core, which also keeps its host queues (the
firmware's pair, the debug port's).  Its PCIe side leaves as ``nvme_bar``
(BAR0's controller registers and doorbells, a Wishbone target), ``nvme_dma``
(host memory, ``rtl.nvme.hostdma.HostDmaSignature``) and ``nvme_msix``
(interrupt vectors), for the SoC to join to its PCIe endpoint
(:mod:`soc.nvme`).
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from rtl.ftl.core import FtlCore
from rtl.lib import wishbone
from rtl.nand.phy import OnfiBusSignature
from rtl.nand.window import NandWindow

__all__ = ["FtlBridge", "FTL_OFFSET"]

HOST_OFFSET = 0x000
FTL_OFFSET = 0x100
NVME_OFFSET = 0x300
FTL = spec.FTL_REGS
assert FTL_OFFSET + FTL.size <= NVME_OFFSET


def _bits(reg: str, name: str):
    b = next(b for b in FTL[reg].bits if b.name == name)
    return slice(b.lsb, b.lsb + b.width)


class FtlBridge(wiring.Component):
    """``FtlCore(**core_args)`` with the window above.

    ``clk_hz``/``sample``: the NAND timing registers' reset value (ONFI mode
    0 at that clock, ``tSAMPLE``).  ``led_stretch``: a board's
    ``led_activity`` (a channel busy, held this many cycles) and
    ``led_fault`` (the NAND window's latched fault) ports; None: no LEDs."""

    def __init__(self, *, clk_hz: int, sample: int, led_stretch: int | None = None, nvme_queues: int = 0,
                 nvme_contexts: int = 8, **core_args):
        self.led_stretch = led_stretch
        self.nvme_queues = nvme_queues
        if nvme_queues:
            from rtl.nvme.drive import NvmeDrive

            self.core = core = NvmeDrive(queues=nvme_queues, contexts=nvme_contexts, **core_args)
            #: SoC memory the NVMe controller's staging areas need (the firmware gives it to them)
            self.staging_bytes = core.staging_bytes
        else:
            self.core = core = FtlCore(**core_args)
            self.staging_bytes = 0
        p = core.params
        self.window = NandWindow(channels=core.channels, ways=p.ways, slots=p.slots, ecc=p.ecc,
                                 slot_bytes=4 * core.slot_words, fw_slot=core.fw_slot, clk_hz=clk_hz, sample=sample)
        regs_end = NVME_OFFSET + spec.NVME_FW_REGS.size if nvme_queues else FTL_OFFSET + FTL.size
        self.nand_offset = max(self.window.window_bytes, 1 << (regs_end - 1).bit_length())
        self.window_bytes = 2 * self.nand_offset
        self.addr_width = (self.window_bytes // 4 - 1).bit_length()
        die_block = core.free.payload.shape()
        for field in ("die", "block"):
            if die_block[field].width > _bits("free", field).stop - _bits("free", field).start:
                raise ValueError(f"{field} numbers do not fit ftl.free")
        wb_sig = wishbone.Signature(addr_width=self.addr_width)
        wbs = {f"wbs_{n}": (In if m.flow == Out else Out)(m.shape) for n, m in wb_sig.members.items()}
        wbm = {f"wbm_{n}": m for n, m in wishbone.Signature(addr_width=30, burst=True).members.items()}
        super().__init__({
            **wbs, **wbm,
            "irq": Out(1),
            "nand": Out(OnfiBusSignature(p.ways, nvddr2=False)).array(core.channels),
            # a board's LEDs (boards/common.py), as on the bare NAND bridge
            **({"led_activity": Out(1), "led_fault": Out(1)} if led_stretch else {}),
            # the NVMe controller's PCIe side
            **({f"nvme_{n}": core.signature.members[f"nvme_{n}"] for n in ("bar", "dma", "msix")}
               if nvme_queues else {}),
        })

    @property
    def regs(self) -> dict[str, int]:
        """Byte offsets of the blocks in the window."""
        return {"HOST": HOST_OFFSET, "FTL": FTL_OFFSET, "NAND": self.nand_offset,
                **({"NVME": NVME_OFFSET} if self.nvme_queues else {})}

    def _flat(self, prefix):
        return type("Flat", (), {n[len(prefix):]: getattr(self, n) for n in dir(self) if n.startswith(prefix)})

    def elaborate(self, platform):
        from boards.nand_bridge import connect_pins

        m = Module()
        m.submodules.core = core = self.core
        m.submodules.window = window = self.window
        C = core.channels
        outer, wbm = self._flat("wbs_"), self._flat("wbm_")
        # the SoC's accesses through registers: its interconnect joins the core's own initiator to this
        # target, and without a register between them the core's address logic, the SoC's crossbar and
        # the register file behind this port made one path (boards/depth.py: over 40 ns on an 85F)
        m.submodules.target = target = wishbone.RegisteredTarget(addr_width=self.addr_width)
        wishbone.connect(m, outer, target.bus)
        wbs = target.target

        for c in range(C):
            connect_pins(m, self.nand[c], core.bus[c])
        wiring.connect(m, window.desc, core.desc)
        wiring.connect(m, core.cpl, window.cpl)
        nvme_irq = core.nvme_fw_irq if self.nvme_queues else 0
        m.d.comb += [core.timing.eq(window.timing), window.busy.eq(core.busy),
                     self.irq.eq(core.irq | window.irq | nvme_irq)]
        for c in range(C):
            wiring.connect(m, window.buf[c], core.fw_buf[c])
        # and the core's requests into the SoC: without registers the executor's address logic, the core's
        # bus arbiter, the SoC's crossbar and the memory behind it made one path; bursts keep a word a cycle
        m.submodules.initiator = initiator = wishbone.RegisteredInitiator(addr_width=30)
        wishbone.connect(m, core.mem, initiator.bus)
        wishbone.connect(m, initiator.target, wbm)

        # -- decode: host registers, FTL registers, NAND window, nothing
        word = wbs.adr
        req = wbs.cyc & wbs.stb
        in_nand = word >= self.nand_offset // 4
        host_enable = Signal()
        in_host = (word < (HOST_OFFSET + 0x100) // 4) & host_enable
        in_ftl = ~in_nand & (word >= FTL_OFFSET // 4) & (word < (FTL_OFFSET + FTL.size) // 4)
        in_nvme = Const(0, 1)
        if self.nvme_queues:
            in_nvme = ~in_nand & (word >= NVME_OFFSET // 4) & (word < (NVME_OFFSET + spec.NVME_FW_REGS.size) // 4)
            fw = core.nvme_fw
            m.d.comb += [fw.adr.eq(word - NVME_OFFSET // 4), fw.dat_w.eq(wbs.dat_w), fw.sel.eq(wbs.sel),
                         fw.we.eq(wbs.we), fw.cyc.eq(wbs.cyc & in_nvme), fw.stb.eq(wbs.stb & in_nvme)]
            wiring.connect(m, wiring.flipped(self.nvme_bar), core.nvme_bar)
            wiring.connect(m, core.nvme_dma, wiring.flipped(self.nvme_dma))
            wiring.connect(m, core.nvme_msix, wiring.flipped(self.nvme_msix))
        ftl_ack = Signal()
        ftl_rdata = Signal(32)
        hole_ack = Signal()
        m.d.comb += [
            core.regs.adr.eq(word[:6]), core.regs.dat_w.eq(wbs.dat_w), core.regs.sel.eq(wbs.sel),
            core.regs.we.eq(wbs.we), core.regs.cyc.eq(wbs.cyc & in_host), core.regs.stb.eq(wbs.stb & in_host),
            window.wb.adr.eq(word - self.nand_offset // 4), window.wb.dat_w.eq(wbs.dat_w),
            window.wb.sel.eq(wbs.sel), window.wb.we.eq(wbs.we),
            window.wb.cyc.eq(wbs.cyc & in_nand), window.wb.stb.eq(wbs.stb & in_nand),
        ]
        with m.If(in_nand):
            m.d.comb += [wbs.dat_r.eq(window.wb.dat_r), wbs.ack.eq(window.wb.ack), wbs.err.eq(window.wb.err)]
        with m.Elif(in_host):
            m.d.comb += [wbs.dat_r.eq(core.regs.dat_r), wbs.ack.eq(core.regs.ack), wbs.err.eq(core.regs.err)]
        if self.nvme_queues:
            with m.Elif(in_nvme):
                m.d.comb += [wbs.dat_r.eq(core.nvme_fw.dat_r), wbs.ack.eq(core.nvme_fw.ack),
                             wbs.err.eq(core.nvme_fw.err)]
        with m.Else():
            m.d.comb += [wbs.dat_r.eq(Mux(in_ftl, ftl_rdata, 0)), wbs.ack.eq(ftl_ack | hole_ack)]
        m.d.sync += [ftl_ack.eq(0), hole_ack.eq(0)]
        with m.If(req & ~in_nand & ~in_host & ~in_ftl & ~in_nvme & ~hole_ack):
            m.d.sync += hole_ack.eq(1)

        self._ftl_registers(m, core, wbs, req & in_ftl & ~ftl_ack, ftl_ack, ftl_rdata, host_enable)
        if self.led_stretch:
            from boards.nand_bridge import activity_led

            activity_led(m, core.busy.any(), self.led_activity, self.led_stretch)
            m.d.comb += self.led_fault.eq(window.fault)
        return m

    def _ftl_registers(self, m, core, wbs, access, ack, rdata, host_enable):
        reg_word = (wbs.adr - FTL_OFFSET // 4)[:(FTL.size // 4 - 1).bit_length()]
        write = access & wbs.we

        def off(name):
            return FTL[name].offset // 4

        # plain read/write registers -> core inputs
        rw = {}
        for name, width in (("pages_per_block", len(core.pages_per_block)), ("block_shift", 5),
                            ("capacity_lo", 32), ("capacity_hi", 32), ("l2p_base", 32), ("bt_base", 32),
                            ("scratch_base", 32), ("identify_base", 32), ("log_base", 32), ("gc_buf", 32),
                            ("seq_lo", 32), ("seq_hi", 32), ("reloc_ppa", 32), ("reloc_tag", 15), ("reloc_lba", 32),
                            ("pending_budget", len(core.pending_budget)),
                            ("map_op", 3), ("map_lba", 32), ("map_value", 32), ("map_expected", 32),
                            ("host_enable", 4), ("cache_base", 32), ("pairing", 1), ("map_lazy", 13)):
            rw[name] = Signal(width, name=f"ftl_{name}")
        m.d.comb += [
            core.pages_per_block.eq(rw["pages_per_block"]), core.block_shift.eq(rw["block_shift"]),
            core.capacity.eq(Cat(rw["capacity_lo"], rw["capacity_hi"])), core.l2p_base.eq(rw["l2p_base"]),
            core.bt_base.eq(rw["bt_base"]), core.scratch_base.eq(rw["scratch_base"]),
            core.identify_base.eq(rw["identify_base"]), core.log_base.eq(rw["log_base"]),
            core.gc_buf.eq(rw["gc_buf"]), core.cache_base.eq(rw["cache_base"]),
            host_enable.eq(rw["host_enable"][_bits("host_enable", "enable")]),
            core.hold.eq(rw["host_enable"][_bits("host_enable", "hold")]),
            core.no_space.eq(rw["host_enable"][_bits("host_enable", "no_space")]),
            core.no_blocks.eq(rw["host_enable"][_bits("host_enable", "no_blocks")]),
            core.mlc.eq(rw["pairing"][_bits("pairing", "mlc")]),
            core.map_lazy.eq(rw["map_lazy"][_bits("map_lazy", "enable")]),
            core.map_seg_shift.eq(rw["map_lazy"][_bits("map_lazy", "seg_shift")]),
        ]

        # mailboxes the firmware pushes into
        free_value = Signal(24)
        free_pending, seq_pending, reloc_pending = Signal(), Signal(), Signal()
        m.d.comb += [
            core.free.valid.eq(free_pending),
            core.free.payload.block.eq(free_value[_bits("free", "block")]),
            core.free.payload.die.eq(free_value[_bits("free", "die")]),
            core.seq_load.valid.eq(seq_pending), core.seq_load.payload.eq(Cat(rw["seq_lo"], rw["seq_hi"])),
            core.reloc.valid.eq(reloc_pending), core.reloc.payload.ppa.eq(rw["reloc_ppa"]),
            core.reloc.payload.tag.eq(rw["reloc_tag"]),
            core.reloc.payload.lba.eq(rw["reloc_lba"][_bits("reloc_lba", "lba")]),
            core.reloc.payload.by_lba.eq(rw["reloc_lba"][_bits("reloc_lba", "given")]),
            core.pending_budget.eq(rw["pending_budget"]),
        ]
        for pending, stream_ in ((free_pending, core.free), (seq_pending, core.seq_load),
                                 (reloc_pending, core.reloc)):
            with m.If(stream_.valid & stream_.ready):
                m.d.sync += pending.eq(0)

        # the firmware's map port: one request per map_go, the port locked until its answer
        map_busy, map_done, map_requested = Signal(), Signal(), Signal()
        map_result, map_old = Signal(3), Signal(32)
        port = core.map_fw
        m.d.comb += [port.lock.eq(map_busy), port.req.payload.op.eq(rw["map_op"]),
                     port.req.payload.lba.eq(rw["map_lba"]), port.req.payload.value.eq(rw["map_value"]),
                     port.req.payload.expected.eq(rw["map_expected"]),
                     port.req.valid.eq(map_busy & port.grant & ~map_requested),
                     port.resp.ready.eq(map_busy & map_requested)]
        with m.If(port.req.valid & port.req.ready):
            m.d.sync += map_requested.eq(1)
        with m.If(port.resp.valid & port.resp.ready):
            r = port.resp.payload
            m.d.sync += [map_busy.eq(0), map_requested.eq(0), map_done.eq(1), map_old.eq(r.old),
                         map_result.eq(Cat(r.updated, r.hit, r.error))]

        # reads
        status = Signal(32)
        m.d.comb += status.eq(Cat(free_pending, core.closed.valid, seq_pending, reloc_pending,
                                  core.reloc_done.valid, map_busy, map_done, core.starved,
                                  core.failed.valid, core.failed_lost, core.cache_busy))
        geometry = Const(core.channels | core.ways << 8 | core.queue_pairs << 16 | core.fw_slot << 24, 32)
        closed = Signal(32)
        m.d.comb += [closed[_bits("closed", "block")].eq(core.closed.payload.block),
                     closed[_bits("closed", "die")].eq(core.closed.payload.die)]
        done = Signal(32)
        m.d.comb += [done[_bits("reloc_done", "tag")].eq(core.reloc_done.payload.tag),
                     done[_bits("reloc_done", "result")].eq(core.reloc_done.payload.result)]
        map_fault = Signal(32)
        m.d.comb += [map_fault[_bits("map_fault", "index")].eq(core.map_fault_seg),
                     map_fault[_bits("map_fault", "waiting")].eq(core.map_fault)]
        tx_status = Signal(32)
        m.d.comb += [tx_status[_bits("tx_status", "open")].eq(core.tx_open),
                     tx_status[_bits("tx_status", "pending_free")].eq(core.pending_free)]
        ro = {off("id"): Const(spec.FTL_REGS_ID, 32), off("version"): Const(spec.SPEC_VERSION, 32),
              off("geometry"): geometry, off("status"): status, off("closed"): closed,
              off("reloc_done"): done, off("reloc_new_ppa"): core.reloc_done.payload.new_ppa,
              off("map_result"): map_result, off("map_old"): map_old,
              off("map_hits"): core.map_hits, off("map_misses"): core.map_misses,
              off("scratch_pages"): Const(core.slots, 32), off("free_depth"): Const(core.alloc.free_depth, 32),
              off("seq_next_lo"): core.seq_next[:32], off("seq_next_hi"): core.seq_next[32:],
              off("failed"): core.failed.payload,
              off("tx_floor_lo"): core.tx_floor[:32], off("tx_floor_hi"): core.tx_floor[32:],
              off("tx_limits"): Const(core.max_open_tx | core.max_pending << 8, 32),
              off("tx_status"): tx_status,
              off("append_limits"): Const(core.max_appends | core.limits.max_remap_triples << 16, 32),
              off("floor_passes"): core.floor_passes,
              off("map_fault"): map_fault, off("map_faults"): core.map_faults,
              off("map_segments"): Const(core.map_segments, 32),
              off("cache_pages"): Const(core.cache_pages, 32), off("cache_in"): core.cache_in,
              off("cache_coalesced"): core.cache_coalesced, off("cache_destaged"): core.cache_destaged,
              off("cache_stripes"): core.cache_stripes, off("cache_dirty"): core.cache_dirty,
              **{off(n): getattr(core, n) for n in ("host_read_pages", "host_write_pages", "record_pages",
                                                    "nand_reads", "nand_programs", "nand_erases",
                                                    "pad_pages", "token_key")}}
        ro.update({off(name): sig for name, sig in rw.items()})
        assert not any(FTL[r.name].access == "wo" and off(r.name) in ro for r in FTL)

        with m.If(access):
            m.d.sync += [ack.eq(1), rdata.eq(0)]
            with m.Switch(reg_word):
                for w, v in ro.items():
                    with m.Case(w):
                        m.d.sync += rdata.eq(v)

        ctrl = {b.name: b.lsb for b in FTL["ctrl"].bits}
        # a pushed request's arguments stay put until the core took it (writes meanwhile are ignored)
        held_by = {"seq_lo": seq_pending, "seq_hi": seq_pending, "reloc_ppa": reloc_pending,
                   "reloc_tag": reloc_pending, "reloc_lba": reloc_pending, "map_op": map_busy, "map_lba": map_busy, "map_value": map_busy,
                   "map_expected": map_busy}
        with m.If(write):
            with m.Switch(reg_word):
                for name, sig in rw.items():
                    with m.Case(off(name)):
                        with m.If(~held_by.get(name, Const(0))):
                            m.d.sync += sig.eq(wbs.dat_w)
                with m.Case(off("map_seg")):
                    m.d.comb += [core.map_seg_set.valid.eq(1),
                                 core.map_seg_set.payload.index.eq(wbs.dat_w[_bits("map_seg", "index")]),
                                 core.map_seg_set.payload.loaded.eq(wbs.dat_w[_bits("map_seg", "loaded")])]
                with m.Case(off("free")):
                    with m.If(~free_pending):
                        m.d.sync += [free_value.eq(wbs.dat_w), free_pending.eq(1)]
                with m.Case(off("ctrl")):
                    d = wbs.dat_w
                    m.d.comb += [core.closed.ready.eq(d[ctrl["pop_closed"]]),
                                 core.reloc_done.ready.eq(d[ctrl["pop_reloc_done"]]),
                                 core.failed.ready.eq(d[ctrl["pop_failed"]])]
                    with m.If(d[ctrl["load_seq"]]):
                        m.d.sync += seq_pending.eq(1)
                    with m.If(d[ctrl["relocate"]]):
                        m.d.sync += reloc_pending.eq(1)
                    with m.If(d[ctrl["map_go"]] & ~map_busy):
                        m.d.sync += [map_busy.eq(1), map_done.eq(0)]
