"""The end-to-end top: LiteSATA's whole host core (``litesata_host_core.py``, a Verilog instance) and the
device stack, ``SataDevice`` + ``SataTransport`` + ``AtaCommandLayer`` (512e on 2048-byte blocks), joined
by ``tb/sata_link/cable.py``'s lanes.

Behind the command layer sits :class:`RamCore`, an FTL-core stand-in in HDL: the core's stream front end
(``core_cmd``/``core_cpl``) serving READ/WRITE/DEALLOCATE/FLUSH as word copies between a block memory and
the staging memory, with the core validator's range check; everything else is INVALID_OPCODE.  The
staging area is a Wishbone RAM that the command layer and the stand-in share through ``rtl.lib.wishbone``'s
arbiter.  Every cycle is HDL; cocotb only starts the host's frontends and reads their results.
"""

from __future__ import annotations

from amaranth import ClockSignal, Instance, Module, Mux, ResetSignal, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from atomflash.spec import Opcode, Status
from rtl.host.queues import command_layout, completion_layout
from rtl.lib import wishbone
from rtl.sata.command import AtaCommandLayer
from rtl.sata.link import SataDevice
from rtl.sata.transport import SataTransport
from tb.sata_link.cable import CableLane

BLOCK_BYTES = 2048
SECTOR_BYTES = 512
CAPACITY_BLOCKS = 128
STAGING_BASE = 0


class RamCore(wiring.Component):
    """The FTL core's stream front end on a block memory of ``capacity`` blocks; one command at a time."""

    def __init__(self, *, capacity: int, block_bytes: int):
        self.capacity, self.block_words = capacity, block_bytes // 4
        super().__init__({
            "core_cmd": In(stream.Signature(command_layout(1))),
            "core_cpl": Out(stream.Signature(completion_layout(1))),
            "mem": Out(wishbone.Signature(addr_width=30, data_width=32)),
        })

    def elaborate(self, platform):
        m = Module()
        words = self.capacity * self.block_words
        m.submodules.blocks = blocks = memory.Memory(shape=32, depth=words, init=[])
        rd, wr = blocks.read_port(), blocks.write_port()
        shift = exact_log2(self.block_words)
        opcode, cid = Signal(8), Signal(16)
        lba, nlb, buf = Signal(64), Signal(32), Signal(30)
        idx, total, status = Signal(ceil_log2(words) + 1), Signal(ceil_log2(words) + 1), Signal(15)
        base = Signal(ceil_log2(words) + 1)
        cmd = self.core_cmd.payload.cmd
        m.d.comb += [rd.addr.eq(base + idx), wr.addr.eq(base + idx)]
        m.d.comb += [self.core_cpl.payload.cid.eq(cid), self.core_cpl.payload.status.eq(status)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.core_cmd.ready.eq(1)
                with m.If(self.core_cmd.valid):
                    m.d.sync += [opcode.eq(cmd.opcode), cid.eq(cmd.cid), lba.eq(cmd.lba), nlb.eq(cmd.nlb),
                                 buf.eq(cmd.buf[2:]), idx.eq(0)]
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.sync += [base.eq(lba << shift), total.eq(nlb << shift), status.eq(Status.SUCCESS)]
                data_op = (opcode == Opcode.READ) | (opcode == Opcode.WRITE) | (opcode == Opcode.DEALLOCATE)
                with m.If(data_op & (nlb == 0)):
                    m.d.sync += status.eq(Status.ZERO_LENGTH)
                    m.next = "COMPLETE"
                with m.Elif(data_op & (lba + nlb > self.capacity)):
                    m.d.sync += status.eq(Status.LBA_OUT_OF_RANGE)
                    m.next = "COMPLETE"
                with m.Elif(opcode == Opcode.READ):
                    m.next = "READ_FETCH"
                with m.Elif(opcode == Opcode.WRITE):
                    m.next = "WRITE"
                with m.Elif(opcode == Opcode.DEALLOCATE):
                    m.next = "TRIM"
                with m.Elif(opcode == Opcode.FLUSH):
                    m.next = "COMPLETE"
                with m.Else():
                    m.d.sync += status.eq(Status.INVALID_OPCODE)
                    m.next = "COMPLETE"
            with m.State("READ_FETCH"):          # the block memory's word comes a cycle later
                m.next = "READ_PUT"
            with m.State("READ_PUT"):
                wishbone.word_access(m, self.mem, buf + idx, rd.data)
                with m.If(self.mem.err):
                    m.d.sync += status.eq(Status.DATA_TRANSFER_ERROR)
                    m.next = "COMPLETE"
                with m.Elif(self.mem.ack):
                    m.d.sync += idx.eq(idx + 1)
                    m.next = "READ_NEXT"
            with m.State("READ_NEXT"):
                m.next = "COMPLETE"
                with m.If(idx != total):
                    m.next = "READ_PUT"      # rd.addr moved to idx last cycle: rd.data is that word now
            with m.State("WRITE"):
                wishbone.word_access(m, self.mem, buf + idx)
                with m.If(self.mem.err):
                    m.d.sync += status.eq(Status.DATA_TRANSFER_ERROR)
                    m.next = "COMPLETE"
                with m.Elif(self.mem.ack):
                    m.d.comb += [wr.en.eq(1), wr.data.eq(self.mem.dat_r)]
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx + 1 == total):
                        m.next = "COMPLETE"
            with m.State("TRIM"):                # a deallocated block reads back zeros
                m.d.comb += [wr.en.eq(1), wr.data.eq(0)]
                m.d.sync += idx.eq(idx + 1)
                with m.If(idx + 1 == total):
                    m.next = "COMPLETE"
            with m.State("COMPLETE"):
                m.d.comb += self.core_cpl.valid.eq(1)
                with m.If(self.core_cpl.ready):
                    m.next = "IDLE"
        return m


class WishboneRam(wiring.Component):
    """A classic Wishbone target on ``depth`` words (the address taken modulo ``depth``)."""

    def __init__(self, depth: int):
        self.depth = depth
        super().__init__({"bus": In(wishbone.Signature(addr_width=30, data_width=32))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ram = ram = memory.Memory(shape=32, depth=self.depth, init=[])
        rd, wr = ram.read_port(), ram.write_port(granularity=8)
        b = self.bus
        access = b.cyc & b.stb & ~b.ack
        m.d.comb += [rd.addr.eq(b.adr), wr.addr.eq(b.adr), wr.data.eq(b.dat_w), b.dat_r.eq(rd.data),
                     wr.en.eq(Mux(access & b.we, b.sel, 0))]
        m.d.sync += b.ack.eq(access)
        return m


HOST_FRONTEND = {   # role: (direction seen from the top, width)
    "identify_start": (In, 1), "identify_done": (Out, 1), "identify_valid": (Out, 1), "identify_ready": (In, 1),
    "identify_data": (Out, 32),
    **{f"{u}_{name}": (d, w) for u in ("gen", "chk") for name, (d, w) in {
        "start": (In, 1), "sector": (In, 48), "count": (In, 16), "random": (In, 1),
        "done": (Out, 1), "aborted": (Out, 1), "errors": (Out, 32)}.items()},
}


class SataEndToEnd(wiring.Component):
    """LiteSATA's host core (``host_module``, its Verilog ports named by ``host_ports``) against the device
    stack; the host's frontends and the cable's and device's test ports are flat at the top."""

    def __init__(self, host_module: str, host_ports: dict[str, str]):
        self._host_module, self._host_ports = host_module, host_ports
        self.device = SataDevice()
        self.transport = SataTransport()
        self.ata = AtaCommandLayer(block_bytes=BLOCK_BYTES, sector_bytes=SECTOR_BYTES)
        self.core = RamCore(capacity=CAPACITY_BLOCKS, block_bytes=BLOCK_BYTES)
        self.down = CableLane(seed=0xACE1)   # host -> device
        self.up = CableLane(seed=0x1D0F)     # device -> host
        super().__init__({
            "cut": In(1), "host_rst": In(1), "host_phy_ready": Out(1), "dev_link_up": Out(1),
            **{f"host_{role}": d(w) for role, (d, w) in HOST_FRONTEND.items()},
            "flip_down": In(1), "flip_up": In(1), "flip_bit": In(5), "flipped_down": Out(8), "flipped_up": Out(8),
            "crc_errors": Out(16), "malformed": Out(16), "ata_idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.device = dev = self.device
        m.submodules.transport = transport = self.transport
        m.submodules.ata = ata = self.ata
        m.submodules.core = core = self.core
        m.submodules.down = down = self.down
        m.submodules.up = up = self.up
        m.submodules.membus = membus = wishbone.Arbiter(2, addr_width=30)
        m.submodules.staging = staging = WishboneRam(ata.staging_bytes // 4)

        wiring.connect(m, transport.tx, dev.tx)
        wiring.connect(m, dev.tx_status, transport.tx_status)
        wiring.connect(m, dev.rx, transport.rx)
        m.d.comb += transport.link_up.eq(dev.link_up)
        wiring.connect(m, transport.command, ata.command)
        wiring.connect(m, transport.data_in, ata.data_in)
        m.d.comb += transport.data_wanted.eq(ata.data_wanted)
        wiring.connect(m, ata.send, transport.send)
        wiring.connect(m, ata.data_out, transport.data_out)
        wiring.connect(m, transport.sent, ata.sent)
        wiring.connect(m, ata.core_cmd, core.core_cmd)
        wiring.connect(m, core.core_cpl, ata.core_cpl)
        wiring.connect(m, ata.mem, membus.initiators[0])
        wiring.connect(m, core.mem, membus.initiators[1])
        wiring.connect(m, membus.bus, staging.bus)
        m.d.comb += [ata.capacity.eq(CAPACITY_BLOCKS), ata.staging_base.eq(STAGING_BASE),
                     self.dev_link_up.eq(dev.link_up), self.crc_errors.eq(transport.crc_errors),
                     self.malformed.eq(transport.malformed), self.ata_idle.eq(ata.idle)]

        for lane in (down, up):
            m.d.comb += [lane.cut.eq(self.cut), lane.flip_bit.eq(self.flip_bit)]
        m.d.comb += [down.flip_arm.eq(self.flip_down), up.flip_arm.eq(self.flip_up),
                     self.flipped_down.eq(down.flipped), self.flipped_up.eq(up.flipped)]

        t = dev.trx
        m.d.comb += [
            t.ready.eq(1),
            up.tx_data.eq(t.tx_data), up.tx_charisk.eq(t.tx_charisk), up.tx_idle.eq(t.tx_idle),
            up.tx_cominit_stb.eq(t.tx_cominit_stb), t.tx_cominit_ack.eq(up.tx_cominit_ack),
            up.tx_comwake_stb.eq(t.tx_comwake_stb), t.tx_comwake_ack.eq(up.tx_comwake_ack),
            t.rx_data.eq(down.rx_data), t.rx_charisk.eq(down.rx_charisk), t.rx_idle.eq(down.rx_idle),
            t.rx_cominit_stb.eq(down.rx_cominit_stb), t.rx_comwake_stb.eq(down.rx_comwake_stb),
        ]

        p = self._host_ports
        conns = {
            "clk": ("i", ClockSignal()), "rst": ("i", ResetSignal() | self.host_rst),
            "ready": ("i", 1), "tx_idle": ("o", down.tx_idle),
            "tx_cominit_stb": ("o", down.tx_cominit_stb), "tx_cominit_ack": ("i", down.tx_cominit_ack),
            "tx_comwake_stb": ("o", down.tx_comwake_stb), "tx_comwake_ack": ("i", down.tx_comwake_ack),
            "rx_idle": ("i", up.rx_idle), "rx_cominit_stb": ("i", up.rx_cominit_stb),
            "rx_comwake_stb": ("i", up.rx_comwake_stb),
            "tx_data": ("o", down.tx_data), "tx_charisk": ("o", down.tx_charisk), "tx_valid": ("o", Signal()),
            "tx_ready": ("i", 1),
            "rx_data": ("i", up.rx_data), "rx_charisk": ("i", up.rx_charisk), "rx_valid": ("i", 1),
            "phy_ready": ("o", self.host_phy_ready),
        }
        for role, (d, _) in HOST_FRONTEND.items():
            conns[role] = ("i" if d is In else "o", getattr(self, f"host_{role}"))
        m.submodules.host = Instance(self._host_module,
                                     **{f"{direction}_{p[role]}": value for role, (direction, value) in conns.items()})
        return m
