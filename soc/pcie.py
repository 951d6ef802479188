"""The PCIe endpoint: LitePCIe's TLP core between a Xilinx UltraScale+ PHY and
the blocks a storage controller needs on the host side of the link.

A PCIe function is three layers, and this module builds the upper two on top of
whichever first one it is given.

**The PHY** turns the link into streams.  On an UltraScale+ part the link
layers (LTSSM, data link layer, flow control, replay, configuration space)
live in the ``pcie4_uscale_plus`` hard block, which presents four AXI-Stream
interfaces in Xilinx's own descriptor format -- completer requests in (CQ),
completer completions out (CC), requester requests out (RQ), requester
completions in (RC) -- plus ``cfg_*`` status wires: the negotiated max
payload and max read request sizes, bus-master enable, the MSI-X enable and
function-mask bits the host writes into the capability.  LitePCIe's
``USPPCIEPHY`` instantiates ``pcie_support``, a wrapper holding the hard
block and four small adapters (``s_axis_rq_adapt``, ``m_axis_rc_adapt``,
``m_axis_cq_adapt``, ``s_axis_cc_adapt``) that rewrite Xilinx descriptors
into standard TLP headers and back, and exposes the result as two pairs of
LitePCIe PHY streams (requests and completions, each way).  The
configuration space, BAR sizes, IDs and class code are properties of the
hard block (Vivado IP parameters), not of this gateware; :class:`PcieConfig`
collects the values the hard block must carry so that the simulation model
and a board build describe the same function.

In simulation there is no hard block.  ``sim/pcie/support.py`` provides
``SimUSPPCIEPHY``: the same ``USPPCIEPHY`` logic (datapaths, configuration
decoding, status registers), with ``pcie_support`` replaced by a module that
keeps LitePCIe's four adapters and brings the hard block's side of them --
``s_axis_rq_*``, ``m_axis_rc_*``, ``m_axis_cq_*``, ``s_axis_cc_*`` and the
``cfg_*`` wires LitePCIe and this module read -- out as ports of the
simulation top.  cocotbext-pcie's ``UltraScalePlusPcieDevice`` drives those
ports exactly as the hard block would, and its ``RootComplex`` enumerates
the function, assigns BAR0, reads and writes it, and serves the device's
reads and writes of host memory.  Everything above the adapters is the gateware
a board would run.  Whoever builds the top chooses the PHY: a board build
:func:`make_phy`, the simulation ``sim/pcie/`` (this module, like all of
``soc/``, never imports ``sim/``); :class:`PcieEndpoint` takes either.

**The TLP core** is ``LitePCIeEndpoint``: a packetizer and a depacketizer
(TLP headers on and off the PHY streams) and a crossbar.  The crossbar's
slave side routes the host's requests to BAR0; its master side arbitrates
the device's own requests (DMA, MSI-X messages) and, through LitePCIe's TLP
controller, hands out tags, limits outstanding reads and returns read
completions in request order, reassembled per request.  One correction sits
between it and the PHY: LitePCIe's packetizer marks every dword of a
request's last beat valid, which the hard block's interface does not allow
for a write that ends mid-beat; :class:`RequestKeep` derives the byte
enables from each TLP's header instead.

**The frontends** are what the device above sees:

* BAR0 (:class:`PcieEndpoint`): ``LitePCIeWishboneMaster`` turns the host's
  BAR0 reads and writes into 32-bit Wishbone cycles.  BAR0 is
  ``config.bar0_size`` bytes: the user region ``[0, msix_table_offset)`` goes
  to ``user.bus`` (by default the bring-up block, :class:`PcieExerciser`;
  later the NVMe controller registers and doorbells), the MSI-X table and
  PBA to :class:`PcieMSIX`, anything else reads as zero.
* Host memory (:class:`HostDMA`): commands ``(address, length)`` each way
  with a data stream, split into memory read and write TLPs that never cross
  a 4 KiB boundary and never exceed the negotiated max payload size (writes)
  or max read request size (reads).  :class:`HostDmaPort` puts the NVMe
  controller's protocol on it: one request at a time, 32-bit words, any
  dword address (realigned onto HostDMA's data-path words).
* Interrupts (:class:`PcieMSIX`): ``LitePCIeMSIX`` sends a vector's message
  (a memory write of the table's data to the table's address) through the
  crossbar; the table and the pending bit array are in BAR0.  A masked
  vector, or every vector while the function is masked or MSI-X disabled
  (where the PHY reports those bits), is held pending and sent when
  unmasked, as the PCIe specification asks.

Clocking: everything here runs in ``sys`` except :class:`RequestKeep`, on
the PHY's side of its clock-domain crossing (``pcie``); the hard block's
status bits read here are synchronized into ``sys``.  In simulation ``sys``
is the hard block's user clock (250 MHz for gen3 x8 at 256 bits) and the PHY
is built with ``cd="pcie"``, so its datapaths are plain wires; on a board
the PHY crosses into ``sys`` itself.

The data path is 256 bits wide.  LitePCIe's 128-bit UltraScale+ request
adapter only forms 3-dword headers (32-bit host addresses); the 256-bit one
takes the 4-dword headers LitePCIe's packetizer emits for UltraScale+ parts
at that width, so the device can address all of host memory, as an NVMe
controller must.
"""

from __future__ import annotations

from dataclasses import dataclass

from migen import Array, C, Case, Cat, ClockDomainsRenamer, If, Mux, Replicate, Signal
from migen.genlib.cdc import MultiReg
from migen.genlib.fsm import FSM, NextState, NextValue
from migen.fhdl.specials import Memory

from litex.gen import LiteXModule, Reduce
from litex.soc.interconnect import stream, wishbone

from litepcie.core import LitePCIeEndpoint, LitePCIeMSIX
from litepcie.frontend.wishbone import LitePCIeWishboneMaster


# Configuration ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PcieConfig:
    """What the function is: the link, its identity and its BAR0 layout.

    The identity, BAR and capability fields are what the hard block must be
    configured with (on a board: the ``pcie4_uscale_plus`` IP parameters; in
    simulation: ``UltraScalePlusPcieDevice``'s function).  The gateware uses
    the BAR0 layout and the link's data width."""

    speed: str = "gen3"             # 8 GT/s
    nlanes: int = 8
    data_width: int = 256           # AXI-Stream width between the hard block and LitePCIe
    user_clk_hz: float = 250e6      # the hard block's user clock for gen3 x8 at 256 bits

    vendor_id: int = 0x10EE         # the hard block's vendor (LitePCIe's default identity)
    device_id: int = 0x9038         # LitePCIe's default for gen3 x8
    subsystem_vendor_id: int = 0x10EE
    subsystem_id: int = 0x0007
    revision_id: int = 0x00
    class_code: int = 0x010802      # mass storage / non-volatile memory / NVM Express

    bar0_size: int = 16 * 1024      # 32-bit, non-prefetchable memory BAR
    msix_vectors: int = 16          # admin queue + I/O queues
    msix_table_offset: int = 0x2000 # BAR0 offset of the MSI-X table (16 bytes a vector)
    msix_pba_offset: int = 0x3000   # BAR0 offset of the pending bit array

    max_payload_supported: int = 512  # LitePCIe's buffers are sized for 512-byte TLPs
    max_pending_reads: int = 8        # read tags in flight (LitePCIe TLP controller)

    def __post_init__(self):
        assert self.data_width in (64, 128, 256, 512)
        assert self.bar0_size & (self.bar0_size - 1) == 0 and self.bar0_size >= 16 * 1024
        assert 1 <= self.msix_vectors <= 64
        assert self.msix_table_offset % 8 == 0 and self.msix_pba_offset % 8 == 0
        assert self.msix_table_offset + 16 * self.msix_vectors <= self.msix_pba_offset < self.bar0_size
        assert self.max_pending_reads & (self.max_pending_reads - 1) == 0


def make_phy(config: PcieConfig, platform, pads):
    """The board PHY: LitePCIe's ``USPPCIEPHY`` (the hard block through
    ``pcie_support``) for ``pads``.  Its simulation twin, with the hard block
    replaced by ports for cocotbext-pcie, is ``sim.pcie.support.SimUSPPCIEPHY``."""
    from litepcie.phy.usppciephy import USPPCIEPHY
    assert len(pads.tx_p) == config.nlanes
    return USPPCIEPHY(platform, pads, speed=config.speed, data_width=config.data_width,
                      bar0_size=config.bar0_size)


def phy_function_status(phy):
    """The hard block's ``cfg_function_status`` (bit 2: bus master enable), in the ``pcie`` domain.

    ``USPPCIEPHY`` keeps it in its instance parameters and exports only bit 0
    in a CSR; the parameter is the signal its synchronizer samples."""
    return phy.pcie_phy_params["o_cfg_function_status"]


# Request byte enables -----------------------------------------------------------------------------

class RequestKeep(LiteXModule):
    """The byte enables (AXI-Stream ``tkeep``) of the requests LitePCIe hands the PHY.

    LitePCIe's packetizer marks every byte of a request's beats valid except
    for one-dword requests, so a write whose payload does not fill its last
    beat (a 16-byte completion entry on a 256-bit interface) reaches the hard
    block with more dwords kept than its length says; the hard block's
    descriptor format wants exactly the TLP's dwords.  This computes them from
    each TLP's first dword (format: 3- or 4-dword header, with data or not;
    length) and a count of the beats since: ``be`` replaces the stream's own.
    When the payload ends within the first four dwords of a beat, LitePCIe's
    header inserter still sends one more beat; it keeps no dword.
    ``stream`` is the PHY's request stream (``dat``, ``valid``, ``ready``,
    ``last``), DW0 in ``dat[0:32]`` (the PHY's little-endian order)."""

    def __init__(self, stream, data_width):
        self.be = Signal(data_width // 8)

        # # #

        ndw = data_width // 32
        in_packet = Signal()
        left = Signal(11)                  # dwords from the next beat on
        dw0 = stream.dat[:32]
        length = Signal(11)
        total = Signal(11)
        here = Signal(11)                  # dwords from this beat on
        self.comb += [
            length.eq(Mux(dw0[:10] == 0, 1024, dw0[:10])),
            total.eq(Mux(dw0[29], 4, 3) + Mux(dw0[30], length, 0)),
            here.eq(Mux(in_packet, left, total)),
            self.be.eq(Cat(*[Replicate(here > i, 4) for i in range(ndw)])),
        ]
        self.sync += If(stream.valid & stream.ready,
            If(stream.last,
                in_packet.eq(0),
            ).Else(
                in_packet.eq(1),
                # the packetizer ends a TLP with a beat of no payload when the last data word
                # fits the beat before: that beat keeps no dword
                left.eq(Mux(here > ndw, here - ndw, 0)),
            )
        )


# Host memory: device-initiated reads and writes ---------------------------------------------------

def dma_command_layout(address_width=64, length_width=24):
    return [("adr", address_width), ("len", length_width)]


class HostDMA(LiteXModule):
    """Reads and writes of host memory by the device, split into TLPs.

    Two independent channels, each a command stream (``adr``: host byte
    address, ``len``: bytes) and a data stream of ``data_width``-bit words,
    dword ``i`` of the transfer in bits ``[32*(i % n), 32*(i % n) + 32)`` of word
    ``i // n`` (``n`` dwords a word).  Both must be multiples of 4 bytes.

    * Write: ``wr_cmd`` with ``len`` bytes on ``wr_data`` (``last`` on the
      final word).  ``wr_cmd`` is accepted once the final write TLP has been
      handed to the TLP core; later TLPs of this module (and MSI-X messages
      raised after it) follow it on the link, so a completion entry written
      after the data, and an interrupt raised after the entry, reach the host
      in that order.
    * Read: ``rd_cmd`` is accepted once its read requests are issued (the next
      command's requests may follow at once); its data comes out of
      ``rd_data`` in order, ``last`` on its final word, ``err`` on what a
      completion the host failed delivers.

    Splitting: a transfer is cut at every multiple of the negotiated max
    payload size (writes) or max read request size (reads), so no TLP crosses
    a 4 KiB boundary (the sizes divide 4096) and every TLP but the first and
    the last is of the full size.  A transfer that needs more than one TLP
    must start on a ``data_width``-bit word boundary: each TLP's payload starts
    at bit 0 of a word, so a later TLP can only begin at a word boundary of
    the data stream.  A write that breaks this, or whose address or length is
    not a multiple of 4, is refused: its data words are taken up to
    ``wr_data.last`` and dropped, nothing reaches the host, and the sticky
    ``error`` is set.  Such a read is still issued (its data comes out
    misplaced, still ending with ``last``) and sets ``error``; so does a
    ``wr_data.last`` that disagrees with ``len``, or a failed completion.
    ``clear_error`` clears it.
    """

    def __init__(self, endpoint, data_width, address_width=64, length_width=24):
        self.wr_cmd = stream.Endpoint(dma_command_layout(address_width, length_width))
        self.wr_data = stream.Endpoint([("data", data_width)])
        self.rd_cmd = stream.Endpoint(dma_command_layout(address_width, length_width))
        self.rd_data = stream.Endpoint([("data", data_width), ("err", 1)])
        self.error = Signal()
        self.clear_error = Signal()

        # # #

        phy = endpoint.phy
        word_bytes = data_width // 8
        word_shift = (word_bytes - 1).bit_length()
        errors = []

        def chunk_of(adr, remaining, size):
            """min(remaining, bytes from adr to the next multiple of size); size a power of two <= 4096."""
            mask = Signal(13)
            room = Signal(14)
            chunk = Signal(length_width)
            self.comb += [
                mask.eq(size - 1),
                room.eq(size - (adr[:13] & mask)),
                chunk.eq(Mux(remaining < room, remaining, room)),
            ]
            return chunk

        # Write channel ----------------------------------------------------------------------------
        wr_port = endpoint.crossbar.get_master_port(write_only=True)
        wr_adr = Signal(address_width)
        wr_remaining = Signal(length_width)
        wr_first_chunk = Signal()
        wr_len = Signal(length_width)      # current TLP, bytes
        wr_beat = Signal(length_width - word_shift + 1)
        wr_beats_m1 = Signal(length_width - word_shift + 1)
        wr_chunk = chunk_of(wr_adr, wr_remaining, phy.max_payload_size)
        wr_error = Signal()
        errors.append(wr_error)

        self.wr_fsm = wr_fsm = FSM(reset_state="IDLE")
        wr_fsm.act("IDLE",
            If(self.wr_cmd.valid,
                NextValue(wr_adr, Cat(C(0, 2), self.wr_cmd.adr[2:])),
                NextValue(wr_remaining, Cat(C(0, 2), self.wr_cmd.len[2:])),
                NextValue(wr_first_chunk, 1),
                If((self.wr_cmd.adr[:2] != 0) | (self.wr_cmd.len[:2] != 0),
                    wr_error.eq(1),
                    NextState("REFUSE"),
                ).Else(
                    NextState("CHUNK"),
                )
            )
        )
        wr_fsm.act("CHUNK",
            If(wr_remaining == 0,
                self.wr_cmd.ready.eq(1),
                NextState("IDLE"),
            ).Else(
                NextValue(wr_len, wr_chunk),
                NextValue(wr_beat, 0),
                NextValue(wr_beats_m1, (wr_chunk - 1) >> word_shift),
                NextValue(wr_first_chunk, 0),
                If(wr_first_chunk & (wr_chunk != wr_remaining) & (wr_adr[:word_shift] != 0),
                    wr_error.eq(1),
                    NextState("REFUSE"),
                ).Else(
                    NextState("SEND"),
                )
            )
        )
        # a command that cannot be carried out: its data is taken and dropped, nothing is sent
        wr_fsm.act("REFUSE",
            self.wr_data.ready.eq(1),
            If(self.wr_data.valid & self.wr_data.last,
                self.wr_cmd.ready.eq(1),
                NextState("IDLE"),
            )
        )
        wr_last_beat = Signal()
        wr_final_word = Signal()
        self.comb += [
            wr_last_beat.eq(wr_beat == wr_beats_m1),
            wr_final_word.eq(wr_last_beat & (wr_len == wr_remaining)),
            wr_port.source.channel.eq(wr_port.channel),
            wr_port.source.first.eq(wr_beat == 0),
            wr_port.source.last.eq(wr_last_beat),
            wr_port.source.we.eq(1),
            wr_port.source.adr.eq(wr_adr),
            wr_port.source.len.eq(wr_len[2:]),
            wr_port.source.req_id.eq(phy.id),
            wr_port.source.tag.eq(0),
            wr_port.source.dat.eq(self.wr_data.data),
            wr_port.sink.ready.eq(1),           # posted: nothing comes back
        ]
        wr_fsm.act("SEND",
            wr_port.source.valid.eq(self.wr_data.valid),
            self.wr_data.ready.eq(wr_port.source.ready),
            If(self.wr_data.valid & wr_port.source.ready,
                If(self.wr_data.last != wr_final_word, wr_error.eq(1)),
                NextValue(wr_beat, wr_beat + 1),
                If(wr_last_beat,
                    NextValue(wr_adr, wr_adr + wr_len),
                    NextValue(wr_remaining, wr_remaining - wr_len),
                    NextState("CHUNK"),
                )
            )
        )

        # Read channel: requests -------------------------------------------------------------------
        rd_port = endpoint.crossbar.get_master_port(read_only=True)
        rd_adr = Signal(address_width)
        rd_remaining = Signal(length_width)
        rd_first_chunk = Signal()
        rd_len = Signal(length_width)
        rd_chunk = chunk_of(rd_adr, rd_remaining, phy.max_request_size)
        rd_error = Signal()
        errors.append(rd_error)
        # one entry per read request in flight: is it the command's last?
        self.rd_info = rd_info = stream.SyncFIFO([("final", 1)], 4 * endpoint.max_pending_requests)

        self.rd_fsm = rd_fsm = FSM(reset_state="IDLE")
        rd_fsm.act("IDLE",
            If(self.rd_cmd.valid,
                NextValue(rd_adr, Cat(C(0, 2), self.rd_cmd.adr[2:])),
                NextValue(rd_remaining, Cat(C(0, 2), self.rd_cmd.len[2:])),
                NextValue(rd_first_chunk, 1),
                If((self.rd_cmd.adr[:2] != 0) | (self.rd_cmd.len[:2] != 0), rd_error.eq(1)),
                NextState("CHUNK"),
            )
        )
        rd_fsm.act("CHUNK",
            If(rd_remaining == 0,
                self.rd_cmd.ready.eq(1),
                NextState("IDLE"),
            ).Else(
                NextValue(rd_len, rd_chunk),
                NextValue(rd_first_chunk, 0),
                If(rd_first_chunk & (rd_chunk != rd_remaining) & (rd_adr[:word_shift] != 0),
                    rd_error.eq(1)),
                NextState("SEND"),
            )
        )
        self.comb += [
            rd_port.source.channel.eq(rd_port.channel),
            rd_port.source.first.eq(1),
            rd_port.source.last.eq(1),
            rd_port.source.we.eq(0),
            rd_port.source.adr.eq(rd_adr),
            rd_port.source.len.eq(rd_len[2:]),
            rd_port.source.req_id.eq(phy.id),
            rd_port.source.tag.eq(0),           # the TLP controller assigns tags
            rd_port.source.dat.eq(0),
            rd_info.sink.final.eq(rd_len == rd_remaining),
        ]
        rd_fsm.act("SEND",
            rd_port.source.valid.eq(rd_info.sink.ready),
            If(rd_port.source.valid & rd_port.source.ready,
                rd_info.sink.valid.eq(1),
                NextValue(rd_adr, rd_adr + rd_len),
                NextValue(rd_remaining, rd_remaining - rd_len),
                If(rd_len == rd_remaining,
                    self.rd_cmd.ready.eq(1),
                    NextState("IDLE"),
                ).Else(
                    NextState("CHUNK"),
                )
            )
        )

        # Read channel: completions (in request order, from the TLP controller) --------------------
        cpl = rd_port.sink
        request_done = Signal()
        self.comb += [
            request_done.eq(cpl.valid & cpl.last & cpl.end),
            self.rd_data.valid.eq(cpl.valid),
            self.rd_data.data.eq(cpl.dat),
            self.rd_data.err.eq(cpl.err),
            self.rd_data.last.eq(request_done & rd_info.source.final),
            cpl.ready.eq(self.rd_data.ready),
            rd_info.source.ready.eq(request_done & self.rd_data.ready),
        ]
        errors.append(cpl.valid & cpl.err)

        # Sticky error -----------------------------------------------------------------------------
        self.sync += If(self.clear_error, self.error.eq(0)).Elif(
            Reduce("OR", errors), self.error.eq(1))


# Host memory for the NVMe controller: one request at a time, 32-bit words ---------------------------

def host_dma_request_layout(address_width=64):
    """``rtl.nvme.hostdma.REQUEST``: ``write``, ``addr`` (bytes), ``bytes``."""
    return [("write", 1), ("addr", address_width), ("bytes", 13)]


#: ``rtl.nvme.hostdma.WORD`` without ``last``, which the stream endpoint carries itself
host_dma_word_layout = [("data", 32), ("error", 1)]
#: ``rtl.nvme.hostdma.DONE``
host_dma_done_layout = [("error", 1)]


class HostDmaPort(LiteXModule):
    """The target side of the NVMe controller's ``HostDmaSignature`` (``rtl/nvme/hostdma.py``),
    on :class:`HostDMA`: one request at a time, data as 32-bit words, any dword address.

    The controller is Amaranth; converted to Verilog and instantiated in a Migen top, its
    initiator port is wired to this one field by field:

    ==========================  ================================  ==========
    ``HostDmaSignature``        here                              direction
    ==========================  ================================  ==========
    ``req.valid/ready``         ``req.valid/ready``               in / out
    ``req.payload.write``       ``req.write``                     in
    ``req.payload.addr``        ``req.addr`` (64)                 in
    ``req.payload.bytes``       ``req.bytes`` (13)                in
    ``wdata.valid/ready``       ``wdata.valid/ready``             in / out
    ``wdata.payload.data``      ``wdata.data`` (32)               in
    ``wdata.payload.last``      ``wdata.last``                    in
    ``wdata.payload.error``     ``wdata.error`` (ignored)         in
    ``rdata.valid/ready``       ``rdata.valid/ready``             out / in
    ``rdata.payload.data``      ``rdata.data`` (32)               out
    ``rdata.payload.last``      ``rdata.last``                    out
    ``rdata.payload.error``     ``rdata.error``                   out
    ``done.valid/ready``        ``done.valid/ready``              out / in
    ``done.payload.error``      ``done.error``                    out
    ==========================  ================================  ==========

    (the endpoints' ``first`` and ``done.last`` are unused.)  The byte at ``addr`` is bits 7:0 of
    the first word.  A request is taken only in the idle state, so the next one waits for the
    previous ``done`` to be taken; a write's words are taken only after its request.

    **Realignment.**  :class:`HostDMA` places dword ``i`` of a transfer in lane ``i % 8`` of word
    ``i // 8`` and needs a transfer of more than one TLP to start on a 32-byte boundary.  A request
    is therefore cut in up to three commands, the empty ones left out: a head from ``addr`` to the
    next 32-byte boundary (fewer than 32 bytes: one TLP), a body of whole 32-byte words, which
    starts aligned, and a tail of the last fewer than 32 bytes (one TLP).  The 32-bit words are
    packed into (writes) or unpacked from (reads) 256-bit words relative to each command's start.
    The tail is its own command because LitePCIe's completion path loses the last beat of a
    completion longer than one beat whose final beat holds at most five dwords (its header
    extractor ends the packet one beat early); a completion of whole beats, or of one beat, comes
    through whole.

    **Writes** are posted: ``done`` (``error`` 0) comes once HostDMA accepted the last command,
    which it does after that command's last TLP is in the TLP core -- so a later request's TLPs,
    and an MSI-X message raised after ``done``, follow it on the link.

    **Reads**: the request's ``bytes / 4`` words come on ``rdata`` in order, ``last`` on the final
    one, then ``done``.  A completion with an error status (unsupported request, completer abort:
    host memory the root does not map, an IOMMU fault) sets ``error`` on the final word and on
    ``done``; from that completion on the words are zeros (what HostDMA still delivers for the
    request is taken and dropped), so the count stays ``bytes / 4``.

    **Refused requests** reach no TLP and end with ``done.error``: every request while
    ``bus_master`` (the function's Bus Master Enable, sampled when the request is taken) is low --
    the PCIe specification forbids the function to issue memory requests then, and the hard block
    (and cocotbext-pcie's model) would drop a read silently and wait for its completion forever --
    a request of fewer than 4 bytes and one of more than 4096.  A refused write's words are taken up to ``wdata.last``
    (none for fewer than 4 bytes); a refused read returns ``bytes / 4`` zero words, ``error`` on
    the last.  The low two bits of ``addr`` and ``bytes`` are ignored (the protocol keeps them
    zero).  Bus mastering turned off while a read is in flight: its requests are out, and the
    completions come as usual.

    **Not handled: a read the host never completes.**  No completion timeout exists anywhere in
    the endpoint yet: such a read holds ``rdata`` (and HostDMA's read channel, and its tag) until
    reset.  A timer here would need HostDMA and LitePCIe's TLP controller to retire the request's
    tags too.

    **Throughput.**  With nothing stalling, one 32-bit word moves every cycle each way.  Write
    words are packed into a 4 KiB buffer and a command's words go to HostDMA once its last one is
    in, so each TLP's beats reach the hard block back to back however slowly the initiator writes;
    a 4 KiB write costs its 1024 word cycles plus 128 beats (about 1170 cycles from request to
    ``done`` in simulation).  Read words are given while the next 256-bit word is loaded in the
    cycle the current one runs out: a 4 KiB read is about 1060 cycles.  Requests of more than
    4096 bytes (the buffer) are refused.
    """

    def __init__(self, dma: HostDMA, bus_master=None):
        self.req = stream.Endpoint(host_dma_request_layout())
        self.wdata = stream.Endpoint(host_dma_word_layout)
        self.rdata = stream.Endpoint(host_dma_word_layout)
        self.done = stream.Endpoint(host_dma_done_layout)
        self.bus_master = Signal(reset=1) if bus_master is None else bus_master

        # # #

        data_width = len(dma.wr_data.data)
        lanes = data_width // 32
        lane_bits = (lanes - 1).bit_length()
        length_bits = len(self.req.bytes) - 2           # dwords of a request
        max_words = 4096 // (data_width // 8)            # data-path words of the largest request

        # The request: its pieces (head up to the next data-path word boundary, then the rest) ------
        req = self.req
        req_dwords = Signal(length_bits)
        req_lane = Signal(lane_bits)
        head = Signal(lane_bits + 1)                     # dwords before the boundary, 0 when aligned
        after_head = Signal(length_bits)
        body = Signal(length_bits)                       # whole data-path words
        tail = Signal(lane_bits)                         # dwords after the last whole word
        refuse = Signal()
        self.comb += [
            req_dwords.eq(req.bytes[2:]),
            req_lane.eq(req.addr[2:2 + lane_bits]),
            If(req_lane != 0,
                head.eq(Mux(req_dwords < lanes - req_lane, req_dwords, lanes - req_lane))),
            after_head.eq(req_dwords - head),
            body.eq(Cat(C(0, lane_bits), after_head[lane_bits:])),
            tail.eq(after_head[:lane_bits]),
            refuse.eq(~self.bus_master | (req_dwords == 0) | (req_dwords > 1024)),
        ]
        # the pieces that are not empty, in order: dwords of the first, second and third
        piece = [Signal(length_bits, name=f"piece{i}") for i in range(3)]
        self.comb += If(head != 0,
            piece[0].eq(head),
            If(body != 0,
                piece[1].eq(body),
                piece[2].eq(tail),
            ).Else(
                piece[1].eq(tail),
            )
        ).Elif(body != 0,
            piece[0].eq(body),
            piece[1].eq(tail),
        ).Else(
            piece[0].eq(tail),
        )
        error = Signal()                                 # the request's: reported on done
        cmd_adr = Signal(64)                             # the command HostDMA gets next
        cmd_dwords = Signal(length_bits)
        next_dwords = [Signal(length_bits, name=f"next_dwords{i}") for i in range(2)]   # the pieces after it, 0 if none
        self.comb += [
            dma.wr_cmd.adr.eq(cmd_adr),
            dma.wr_cmd.len.eq(cmd_dwords << 2),
            dma.rd_cmd.adr.eq(cmd_adr),
            dma.rd_cmd.len.eq(cmd_dwords << 2),
        ]
        start = Signal()                                 # a request is taken this cycle

        # Writes: pack words into data-path words, each piece from lane 0 ---------------------------
        pk_lane = Signal(lane_bits)
        pk_left = Signal(length_bits)                    # dwords left in the current piece
        pk_next = [Signal(length_bits, name=f"pk_next{i}") for i in range(2)]   # the pieces after it
        pk_acc = [Signal(32, name=f"pk_acc{i}") for i in range(lanes)]
        # whole pieces go to HostDMA: a piece's words wait here until its last one is in
        self.write_buffer = buf = stream.SyncFIFO([("data", data_width)], max_words, buffered=True)
        out = buf.sink
        pieces_buffered = Signal(2)
        self.comb += [
            dma.wr_data.valid.eq(buf.source.valid & (pieces_buffered != 0)),
            dma.wr_data.data.eq(buf.source.data),
            dma.wr_data.last.eq(buf.source.last),
            buf.source.ready.eq(dma.wr_data.ready & (pieces_buffered != 0)),
        ]
        self.sync += pieces_buffered.eq(pieces_buffered
            + (out.valid & out.ready & out.last)
            - (buf.source.valid & buf.source.ready & buf.source.last))
        pk_take = Signal()
        pk_complete = Signal()                           # the word taken now ends a data-path word
        pk_active = Signal()
        pk_drop = Signal()
        self.comb += [
            pk_complete.eq((pk_lane == lanes - 1) | (pk_left == 1)),
            If(pk_drop,
                self.wdata.ready.eq(1),
            ).Elif(pk_active,
                self.wdata.ready.eq((pk_left != 0) & (~pk_complete | out.ready)),
            ),
            pk_take.eq(pk_active & self.wdata.valid & self.wdata.ready),
        ]
        self.comb += [
            out.valid.eq(pk_take & pk_complete),
            out.last.eq(pk_left == 1),
            out.data.eq(Cat(*[Mux(pk_lane == i, self.wdata.data, pk_acc[i]) for i in range(lanes)])),
        ]
        self.sync += [
            If(start,
                pk_lane.eq(0),
                pk_left.eq(piece[0]),
                pk_next[0].eq(piece[1]),
                pk_next[1].eq(piece[2]),
            ).Elif(pk_take,
                Case(pk_lane, {i: pk_acc[i].eq(self.wdata.data) for i in range(lanes)}),
                If(pk_complete,
                    pk_lane.eq(0),
                ).Else(
                    pk_lane.eq(pk_lane + 1),
                ),
                If(pk_left == 1,
                    pk_left.eq(pk_next[0]),
                    pk_next[0].eq(pk_next[1]),
                    pk_next[1].eq(0),
                ).Else(
                    pk_left.eq(pk_left - 1),
                ),
            ),
        ]

        # Reads: unpack data-path words, each piece from lane 0 -------------------------------------
        up_buf = Signal(data_width)
        up_valid = Signal()
        up_lane = Signal(lane_bits)
        up_count = Signal(lane_bits + 1)                 # dwords of up_buf that belong to the request
        up_left = Signal(length_bits)                    # dwords the current piece still has to deliver
        up_next = [Signal(length_bits, name=f"up_next{i}") for i in range(2)]
        rd_left = Signal(length_bits)                    # words still to give on rdata
        pieces_left = Signal(2)                          # HostDMA commands whose last word is still to come
        zeros = Signal()                                 # after an error: give zeros, drop HostDMA's words
        up_active = Signal()
        src = dma.rd_data
        up_give = Signal()
        up_finish = Signal()                             # the word given now is up_buf's last
        up_load = Signal()
        up_words = Signal(lane_bits + 1)
        self.comb += [
            self.rdata.valid.eq(up_active & Mux(zeros, rd_left != 0, up_valid)),
            self.rdata.data.eq(Mux(zeros, 0, Array([up_buf[32 * i:32 * (i + 1)] for i in range(lanes)])[up_lane])),
            self.rdata.last.eq(rd_left == 1),
            self.rdata.error.eq((rd_left == 1) & error),
            up_give.eq(self.rdata.valid & self.rdata.ready),
            up_finish.eq(up_lane == up_count - 1),
            If(up_active,
                src.ready.eq(Mux(zeros, pieces_left != 0, ~up_valid | (up_give & up_finish))),
            ),
            up_load.eq(src.valid & src.ready),
            up_words.eq(Mux(up_left < lanes, up_left, lanes)),
        ]
        self.sync += [
            If(up_give,
                rd_left.eq(rd_left - 1),
                up_lane.eq(up_lane + 1),
                If(up_finish, up_valid.eq(0)),
            ),
            If(up_load,
                If(src.last, pieces_left.eq(pieces_left - 1)),
                If(src.err,
                    zeros.eq(1),
                    up_valid.eq(0),
                ).Elif(~zeros,
                    up_buf.eq(src.data),
                    up_valid.eq(1),
                    up_lane.eq(0),
                    up_count.eq(up_words),
                    If(up_left <= lanes,
                        up_left.eq(up_next[0]),
                        up_next[0].eq(up_next[1]),
                        up_next[1].eq(0),
                    ).Else(
                        up_left.eq(up_left - lanes),
                    ),
                ),
            ),
            If(start,
                up_valid.eq(0),
                up_left.eq(piece[0]),
                up_next[0].eq(piece[1]),
                up_next[1].eq(piece[2]),
                rd_left.eq(req_dwords),
                pieces_left.eq(Mux(refuse, 0, (piece[0] != 0) + (piece[1] != 0) + (piece[2] != 0))),
                zeros.eq(refuse),
            ),
        ]

        # Sequencing ---------------------------------------------------------------------------------
        self.fsm = fsm = FSM(reset_state="IDLE")
        self.comb += [
            pk_active.eq(fsm.ongoing("WRITE")),
            pk_drop.eq(fsm.ongoing("WRITE-DROP")),
            up_active.eq(fsm.ongoing("READ") | fsm.ongoing("READ-DATA")),
        ]
        fsm.act("IDLE",
            req.ready.eq(1),
            If(req.valid,
                start.eq(1),
                NextValue(error, refuse),
                NextValue(cmd_adr, Cat(C(0, 2), req.addr[2:])),
                NextValue(cmd_dwords, piece[0]),
                NextValue(next_dwords[0], piece[1]),
                NextValue(next_dwords[1], piece[2]),
                If(req.write,
                    If(req_dwords == 0,
                        NextState("DONE"),
                    ).Elif(refuse,
                        NextState("WRITE-DROP"),
                    ).Else(
                        NextState("WRITE"),
                    )
                ).Else(
                    If(refuse, NextState("READ-DATA")).Else(NextState("READ")),
                )
            )
        )
        next_piece = [
            NextValue(cmd_adr, cmd_adr + (cmd_dwords << 2)),
            NextValue(cmd_dwords, next_dwords[0]),
            NextValue(next_dwords[0], next_dwords[1]),
            NextValue(next_dwords[1], 0),
        ]
        fsm.act("WRITE",
            dma.wr_cmd.valid.eq(1),
            If(dma.wr_cmd.ready,
                *next_piece,
                If(next_dwords[0] == 0, NextState("DONE")),
            )
        )
        fsm.act("WRITE-DROP",
            If(self.wdata.valid & self.wdata.last, NextState("DONE")),
        )
        fsm.act("READ",
            dma.rd_cmd.valid.eq(1),
            If(dma.rd_cmd.ready,
                *next_piece,
                If(next_dwords[0] == 0, NextState("READ-DATA")),
            )
        )
        fsm.act("READ-DATA",
            If((rd_left == 0) & (pieces_left == 0), NextState("DONE")),
        )
        self.sync += If(up_active & up_load & src.err, error.eq(1))
        fsm.act("DONE",
            self.done.valid.eq(1),
            self.done.error.eq(error),
            If(self.done.ready, NextState("IDLE")),
        )


# MSI-X --------------------------------------------------------------------------------------------

class PcieMSIX(LiteXModule):
    """MSI-X: ``LitePCIeMSIX`` with its table and pending bits on BAR0.

    ``irqs`` (one bit a vector, a pulse per event) sets the vector's pending
    bit.  A pending vector is handed to ``LitePCIeMSIX`` -- which reads the
    table and sends the message -- once it is unmasked in the table, the
    function is not masked and MSI-X is enabled (``enable`` and
    ``function_mask`` come from the hard block's
    ``cfg_interrupt_msix_enable``/``cfg_interrupt_msix_mask`` where the PHY
    has them; LitePCIe's board ``pcie_support`` does not export them, and
    without them only the per-vector mask is honoured).  Events of one vector
    while it is pending coalesce into one message.  ``LitePCIeMSIX`` checks
    the table's mask again when it sends: a vector the host masks in the few
    cycles between hand-over and send is dropped, not held.

    ``bus`` is a 32-bit Wishbone slave decoding BAR0 word addresses: the
    table at ``table_offset`` (per vector: message address low, high, data,
    vector control; bit 0 of vector control masks the vector, set at reset)
    and the PBA at ``pba_offset``.  ``LitePCIeMSIX`` sends 32-bit message
    addresses: the table's upper address dword is stored but not used.
    """

    def __init__(self, endpoint, nvectors, table_offset, pba_offset, enable=None, function_mask=None):
        self.irqs = Signal(nvectors)
        self.bus = bus = wishbone.Interface(data_width=32)
        self.pending = Signal(nvectors)

        # # #

        self.core = core = LitePCIeMSIX(endpoint, width=nvectors, default_enable=1)

        mask = Signal(nvectors, reset=2**nvectors - 1)   # shadow of vector control bit 0
        gate = Signal()
        self.comb += gate.eq((1 if enable is None else enable) & ~(0 if function_mask is None else function_mask))
        release = Signal(nvectors)
        self.comb += [
            release.eq(self.pending & ~mask & Replicate(gate, nvectors)),
            core.irqs.eq(release),
        ]
        self.sync += self.pending.eq((self.pending & ~release) | self.irqs)
        pba = Signal(64)
        self.comb += pba.eq(self.pending | core.pba.status)

        # Wishbone: table and PBA --------------------------------------------------------------
        table_word = table_offset // 4
        pba_word = pba_offset // 4
        port = core.table.get_port(write_capable=True, we_granularity=32)
        self.specials += port
        in_table = Signal()
        in_pba = Signal()
        entry = Signal(max=max(nvectors, 2))
        dword = Signal(2)
        self.comb += [
            in_table.eq((bus.adr >= table_word) & (bus.adr < table_word + 4 * nvectors)),
            in_pba.eq((bus.adr >= pba_word) & (bus.adr < pba_word + 2)),
            entry.eq((bus.adr - table_word) >> 2),
            dword.eq(bus.adr[:2]),
            port.adr.eq(entry),
            # LitePCIeMSIX's table word: dword 0 of an entry in bits [96:128] ... dword 3 in [0:32]
            port.dat_w.eq(Replicate(bus.dat_w, 4)),
        ]
        access = Signal()
        self.comb += access.eq(bus.cyc & bus.stb & ~bus.ack)
        self.comb += If(access & bus.we & in_table,
            Case(dword, {d: port.we.eq(1 << (3 - d)) for d in range(4)}))
        self.sync += If(access & bus.we & in_table & (dword == 3) & bus.sel[0],
            Case(entry, {i: mask[i].eq(bus.dat_w[0]) for i in range(nvectors)}))
        read_dword = Signal(2)
        read_table = Signal()
        pba_r = Signal(32)
        self.sync += [
            bus.ack.eq(access),
            read_dword.eq(dword),
            read_table.eq(in_table),
            pba_r.eq(Mux(in_pba, Mux(bus.adr == pba_word + 1, pba[32:], pba[:32]), 0)),
        ]
        words = [port.dat_r[32 * (3 - d):32 * (4 - d)] for d in range(4)]
        self.comb += bus.dat_r.eq(Mux(read_table, Array(words)[read_dword], pba_r))


# BAR0 bring-up block ------------------------------------------------------------------------------

EXERCISER_ID = 0x41465043      # "AFPC"
EXERCISER_BUFFER_OFFSET = 0x1000
EXERCISER_BUFFER_SIZE = 0x1000

#: register offsets of :class:`PcieExerciser` (bytes from BAR0)
EXERCISER_REGS = dict(
    ID=0x000,          # RO  EXERCISER_ID
    VERSION=0x004,     # RO  1
    SCRATCH=0x008,     # RW  holds what is written
    LINK=0x00C,        # RO  bit 0 link up, bit 1 bus master enable, bit 2 MSI-X enable, bit 3 MSI-X function mask
    MPS=0x010,         # RO  negotiated max payload size, bytes
    MRRS=0x014,        # RO  negotiated max read request size, bytes
    DMA_ADDR_LO=0x020,  # RW  host address of the next transfer
    DMA_ADDR_HI=0x024,
    DMA_LEN=0x028,     # RW  bytes (multiple of 4, up to the buffer's 4096)
    DMA_CTRL=0x02C,    # WO  bit 0: buffer -> host memory; bit 1: host memory -> buffer; bit 2: clear error
    DMA_STATUS=0x030,  # RO  bit 0 busy, bit 1 error (sticky), bits 16..31 transfers done
    IRQ=0x040,         # WO  a 1 in bit i raises MSI-X vector i
)


class PcieExerciser(LiteXModule):
    """The default user region of BAR0: identification, a scratch register,
    the link as the device sees it, and a DMA exerciser over a 4 KiB buffer.

    A Wishbone slave over ``[0, 0x2000)`` of BAR0 (:data:`EXERCISER_REGS`; the
    buffer at ``0x1000``, dword ``i`` of it dword ``i`` of every transfer).
    ``DMA_CTRL`` starts one transfer between the buffer and host memory
    through :class:`HostDMA` (from buffer offset 0); ``IRQ`` raises MSI-X
    vectors.  Bring-up and test gateware: the NVMe controller replaces it."""

    def __init__(self, dma: HostDMA, msix: PcieMSIX, data_width, link_up, function_status,
                 max_payload_size, max_request_size, msix_enable=0, msix_function_mask=0):
        self.bus = bus = wishbone.Interface(data_width=32)

        # # #

        word_bytes = data_width // 8
        nwords = EXERCISER_BUFFER_SIZE // word_bytes
        dwords = word_bytes // 4
        dword_shift = (dwords - 1).bit_length()

        # Buffer -------------------------------------------------------------------------------
        self.specials.buffer = buffer = Memory(data_width, nwords)
        wb_port = buffer.get_port(write_capable=True, we_granularity=32)
        dma_port = buffer.get_port(write_capable=True)
        self.specials += wb_port, dma_port

        # Registers ----------------------------------------------------------------------------
        scratch = Signal(32)
        dma_addr = Signal(64)
        dma_len = Signal(13)
        done_count = Signal(16)
        start_to_host = Signal()
        start_from_host = Signal()

        R = {k: v // 4 for k, v in EXERCISER_REGS.items()}
        buf_word = EXERCISER_BUFFER_OFFSET // 4
        access = Signal()
        in_buffer = Signal()
        self.comb += [
            access.eq(bus.cyc & bus.stb & ~bus.ack),
            in_buffer.eq((bus.adr >= buf_word) & (bus.adr < buf_word + EXERCISER_BUFFER_SIZE // 4)),
            wb_port.adr.eq((bus.adr - buf_word) >> dword_shift),
            wb_port.dat_w.eq(Replicate(bus.dat_w, dwords)),
            If(access & bus.we & in_buffer, wb_port.we.eq(1 << bus.adr[:dword_shift])),
        ]
        writes = {
            R["SCRATCH"]: scratch.eq(bus.dat_w),
            R["DMA_ADDR_LO"]: dma_addr[:32].eq(bus.dat_w),
            R["DMA_ADDR_HI"]: dma_addr[32:].eq(bus.dat_w),
            R["DMA_LEN"]: dma_len.eq(bus.dat_w),
        }
        self.sync += If(access & bus.we, Case(bus.adr, writes))
        self.comb += If(access & bus.we & (bus.adr == R["DMA_CTRL"]), [
            start_to_host.eq(bus.dat_w[0]),
            start_from_host.eq(bus.dat_w[1]),
            dma.clear_error.eq(bus.dat_w[2]),
        ])
        self.comb += If(access & bus.we & (bus.adr == R["IRQ"]), msix.irqs.eq(bus.dat_w))

        busy = Signal()
        link = Signal(32)
        self.comb += link.eq(Cat(link_up, function_status[2], msix_enable, msix_function_mask))
        reads = {
            R["ID"]: EXERCISER_ID,
            R["VERSION"]: 1,
            R["SCRATCH"]: scratch,
            R["LINK"]: link,
            R["MPS"]: max_payload_size,
            R["MRRS"]: max_request_size,
            R["DMA_ADDR_LO"]: dma_addr[:32],
            R["DMA_ADDR_HI"]: dma_addr[32:],
            R["DMA_LEN"]: dma_len,
            R["DMA_STATUS"]: Cat(busy, dma.error, C(0, 14), done_count),
        }
        reg_r = Signal(32)
        read_buffer = Signal()
        read_dword = Signal(max(dword_shift, 1))
        self.sync += [
            bus.ack.eq(access),
            read_buffer.eq(in_buffer),
            read_dword.eq(bus.adr[:dword_shift] if dword_shift else 0),
            reg_r.eq(0),
            Case(bus.adr, {k: reg_r.eq(v) for k, v in reads.items()}),
        ]
        buffer_dwords = [wb_port.dat_r[32 * i:32 * (i + 1)] for i in range(dwords)]
        self.comb += bus.dat_r.eq(Mux(read_buffer, Array(buffer_dwords)[read_dword], reg_r))

        # DMA sequencer ------------------------------------------------------------------------
        index = Signal(max=nwords + 1)
        last_index = Signal(max=nwords + 1)
        self.comb += last_index.eq((dma_len - 1) >> (word_bytes.bit_length() - 1))
        self.fsm = fsm = FSM(reset_state="IDLE")
        self.comb += busy.eq(~fsm.ongoing("IDLE"))
        fsm.act("IDLE",
            NextValue(index, 0),
            dma_port.adr.eq(0),
            If(start_to_host, NextState("TO-HOST-CMD")),
            If(start_from_host, NextState("FROM-HOST-CMD")),
        )
        # buffer -> host: the command waits (valid) until the last TLP is out; the words
        # stream meanwhile, dma_port.dat_r always holding word `index`
        advance = Signal()
        self.comb += [
            dma.wr_cmd.adr.eq(dma_addr),
            dma.wr_cmd.len.eq(dma_len),
            dma.wr_data.data.eq(dma_port.dat_r),
            dma.wr_data.last.eq(index == last_index),
            advance.eq(dma.wr_data.valid & dma.wr_data.ready),
        ]
        fsm.act("TO-HOST-CMD",       # one cycle for dma_port.dat_r to hold word 0
            dma_port.adr.eq(0),
            NextState("TO-HOST"),
        )
        fsm.act("TO-HOST",
            dma.wr_cmd.valid.eq(1),
            dma.wr_data.valid.eq(index <= last_index),
            dma_port.adr.eq(index + advance),
            If(advance, NextValue(index, index + 1)),
            If(dma.wr_cmd.ready,
                NextValue(done_count, done_count + 1),
                NextState("IDLE"),
            )
        )
        # host -> buffer: request, then write each word as it comes
        self.comb += [
            dma.rd_cmd.adr.eq(dma_addr),
            dma.rd_cmd.len.eq(dma_len),
            dma.rd_data.ready.eq(fsm.ongoing("FROM-HOST-CMD") | fsm.ongoing("FROM-HOST")),
        ]
        fsm.act("FROM-HOST-CMD",
            dma.rd_cmd.valid.eq(1),
            dma_port.adr.eq(index),
            dma_port.dat_w.eq(dma.rd_data.data),
            If(dma.rd_data.valid,
                dma_port.we.eq(index < nwords),
                NextValue(index, index + 1),
            ),
            If(dma.rd_cmd.ready, NextState("FROM-HOST")),
            If(dma.rd_data.valid & dma.rd_data.last,
                NextValue(done_count, done_count + 1),
                NextState("IDLE"),
            ),
        )
        fsm.act("FROM-HOST",
            dma_port.adr.eq(index),
            dma_port.dat_w.eq(dma.rd_data.data),
            If(dma.rd_data.valid,
                dma_port.we.eq(index < nwords),
                NextValue(index, index + 1),
                If(dma.rd_data.last,
                    NextValue(done_count, done_count + 1),
                    NextState("IDLE"),
                )
            )
        )


# The endpoint -------------------------------------------------------------------------------------

class _ReadsZero(LiteXModule):
    """A Wishbone slave for the unmapped rest of BAR0: acks, reads zero."""

    def __init__(self):
        self.bus = bus = wishbone.Interface(data_width=32)
        self.sync += bus.ack.eq(bus.cyc & bus.stb & ~bus.ack)
        self.comb += bus.dat_r.eq(0)


class PcieEndpoint(LiteXModule):
    """LitePCIe's endpoint with BAR0, host-memory DMA and MSI-X (see the module docstring).

    ``phy``: from :func:`make_phy`.  ``user``: ``None`` for the bring-up block
    (:class:`PcieExerciser`), or a callable ``user(endpoint) -> module with a
    32-bit Wishbone ``bus``` serving BAR0 ``[0, config.msix_table_offset)``
    (word addresses from BAR0 offset 0).

    What a controller above uses: ``self.dma`` (:class:`HostDMA`; an NVMe
    controller reaches it through :class:`HostDmaPort`, given
    ``self.bus_master_enable``), ``self.msix.irqs`` (:class:`PcieMSIX`),
    ``self.user``, and the negotiated ``phy.max_payload_size`` /
    ``phy.max_request_size`` (bytes)."""

    def __init__(self, phy, config: PcieConfig, user=None):
        # (the PHY becomes a submodule of LitePCIeEndpoint, which keeps it as ``endpoint.phy``)
        self.config = config

        # PHY: requests carry their own byte enables (RequestKeep, on the PHY's side of its CDC) -----
        self.request_keep = ClockDomainsRenamer("pcie")(RequestKeep(phy.s_axis_rq, phy.data_width))
        phy.pcie_phy_params["i_s_axis_rq_tkeep"] = self.request_keep.be

        # hard block status the PHY does not synchronize (or, for MSI-X, does not have on a board)
        function_status = Signal(16)
        self.specials += MultiReg(phy_function_status(phy), function_status, "sys")
        self.bus_master_enable = function_status[2]
        msix_enable = msix_function_mask = None
        if hasattr(phy, "msix_enable"):
            msix_enable, msix_function_mask = Signal(), Signal()
            self.specials += [MultiReg(phy.msix_enable, msix_enable, "sys"),
                              MultiReg(phy.msix_function_mask, msix_function_mask, "sys")]

        # TLP core ---------------------------------------------------------------------------------
        self.endpoint = endpoint = LitePCIeEndpoint(phy,
            max_pending_requests=config.max_pending_reads,
            address_width=64,
            endianness=phy.endianness)

        # Frontends --------------------------------------------------------------------------------
        self.dma = HostDMA(endpoint, data_width=phy.data_width)
        self.msix = PcieMSIX(endpoint, config.msix_vectors, config.msix_table_offset, config.msix_pba_offset,
                             enable=msix_enable, function_mask=msix_function_mask)
        if user is None:
            self.user = PcieExerciser(self.dma, self.msix, phy.data_width,
                link_up=phy._link_status.fields.status,
                function_status=function_status,
                max_payload_size=phy.max_payload_size,
                max_request_size=phy.max_request_size,
                msix_enable=0 if msix_enable is None else msix_enable,
                msix_function_mask=0 if msix_function_mask is None else msix_function_mask)
        else:
            self.user = user(self)

        # BAR0 -------------------------------------------------------------------------------------
        self.bar0 = LitePCIeWishboneMaster(endpoint)
        self.rest = _ReadsZero()
        table_word = config.msix_table_offset // 4
        pba_word = config.msix_pba_offset // 4
        nv = config.msix_vectors

        def in_user(adr):
            return adr < table_word

        def in_msix(adr):
            return ((adr >= table_word) & (adr < table_word + 4 * nv)) | ((adr >= pba_word) & (adr < pba_word + 2))

        self.decoder = wishbone.Decoder(self.bar0.wishbone, [
            (in_user, self.user.bus),
            (in_msix, self.msix.bus),
            (lambda adr: ~in_user(adr) & ~in_msix(adr), self.rest.bus),
        ], register=False)
