"""The SATA drive: phy and link, transport and ATA command layer in front of the FTL core, one SoC
memory port.

::

    transceiver ◄──► SataDevice (phy + link) ◄──► SataTransport ◄──► AtaCommandLayer ──core_cmd/core_cpl──► FtlCore
                                                                       │ mem                 │ mem, regs, ...
                                                                       └──► Wishbone Arbiter ◄┘ ──► mem (SoC memory)

The ATA sector is 512 bytes on the core's block (512e, ``sector_bytes``; ``None`` makes it the block).
The FTL core keeps every port it has for the firmware under the same names, as in
``rtl/nvme/drive.py``, so whatever plays the firmware for a bare core plays it here too.  The SATA
side's ports are prefixed ``sata_``: ``sata_trx`` the transceiver's parallel side (LiteSATA's names),
``sata_staging_base`` where in SoC memory the command layer stages data (``staging_bytes``), and the
layers' state and counters.  This module only composes.
"""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from rtl.ftl.core import FtlCore
from rtl.ftl.front import CoreFront, connect_core_ports, core_members, memory_port
from rtl.lib import wishbone

from .command import AtaCommandLayer
from .link import SataDevice
from .phy import TransceiverSignature
from .transport import SataTransport

__all__ = ["SataDrive"]

SATA_PORTS = {
    "sata_trx": Out(TransceiverSignature()),
    "sata_staging_base": In(32),
    "sata_link_up": Out(1),
    "sata_idle": Out(1),
    "sata_write_cache": Out(1),
    "sata_malformed": Out(16),
    "sata_crc_errors": Out(16),
}


class SataDrive(CoreFront, wiring.Component):
    """:class:`SataDevice` + :class:`SataTransport` + :class:`AtaCommandLayer` + :class:`FtlCore`;
    keyword arguments not named here go to the core.

    Parameters
    ----------
    sector_bytes : ATA's logical sector (512: 512e on the core's block; ``None``: the block).
    oob_timeout, quiet_cycles : the PHY's (``SataDevicePhy``).
    """

    def __init__(self, *, sector_bytes: int | None = spec.ATA.SECTOR_BYTES_MIN, oob_timeout: int = 2000,
                 quiet_cycles: int = 64, **core_args):
        self.core = FtlCore(stream_queues=1, **core_args)
        self.device = SataDevice(oob_timeout=oob_timeout, quiet_cycles=quiet_cycles)
        self.transport = SataTransport()
        self.ata = AtaCommandLayer(block_bytes=self.core.profile.page_data, sector_bytes=sector_bytes,
                                   limits=self.core.limits, core_queue_ids=self.core.queue_ids, core_queue=0,
                                   volatile_cache=bool(self.core.cache_pages))
        self.staging_bytes = self.ata.staging_bytes
        members = core_members(self.core)
        members.update(SATA_PORTS)
        members["mem"] = memory_port()
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.device = device = self.device
        m.submodules.transport = transport = self.transport
        m.submodules.ata = ata = self.ata
        m.submodules.membus = membus = wishbone.Arbiter(2, addr_width=30, burst=True)

        wiring.connect(m, wiring.flipped(self.sata_trx), device.trx)
        wiring.connect(m, transport.tx, device.tx)
        wiring.connect(m, device.tx_status, transport.tx_status)
        wiring.connect(m, device.rx, transport.rx)
        m.d.comb += transport.link_up.eq(device.link_up)
        wiring.connect(m, transport.command, ata.command)
        wiring.connect(m, transport.data_in, ata.data_in)
        m.d.comb += transport.data_wanted.eq(ata.data_wanted)
        wiring.connect(m, ata.send, transport.send)
        wiring.connect(m, ata.data_out, transport.data_out)
        wiring.connect(m, transport.sent, ata.sent)

        wiring.connect(m, ata.core_cmd, core.stream_cmd)
        wiring.connect(m, core.stream_cpl, ata.core_cpl)
        m.d.comb += [ata.capacity.eq(self.capacity), ata.staging_base.eq(self.sata_staging_base),
                     self.sata_link_up.eq(device.link_up), self.sata_idle.eq(ata.idle),
                     self.sata_write_cache.eq(ata.write_cache), self.sata_malformed.eq(transport.malformed),
                     self.sata_crc_errors.eq(transport.crc_errors)]
        wiring.connect(m, core.mem, membus.initiators[0])
        wishbone.connect(m, ata.mem, membus.initiators[1])
        wiring.connect(m, membus.bus, wiring.flipped(self.mem))

        connect_core_ports(m, self, core)
        return m
