"""The drive's host link on Ethernet: LiteEth's UDP/IP core with LiteX's
Etherbone as a host bus master, for the simulated SoC (on LiteEth's PHY
model) and for Ethernet boards (on their PHY) alike.

Etherbone packets carry one record each: up to 255 writes to consecutive
words, then up to 255 reads of any words, answered with the words read.  The
host library (``atomflash.transport.EtherboneTransport``) sends one record at
a time and makes every record answer: a read, or writes with a read of their
own last word behind them, so the answer says the words are written.

Three things LiteEth needs for that at the wire's rate, all set here:

* **Received frames wait whole in a buffer (:class:`RxFrameBuffer`).**  A
  PHY cannot be held off, and LiteEth's receive path buffers only 32 bytes
  before the Etherbone master, which waits whenever the bus is busy (the
  controller's DMA burst into host memory has it).  The host keeps several
  records in flight (a round trip per record would cap the link far below
  the wire; on a LAN the host's own stack adds tens of microseconds), so
  frames must queue: the buffer takes a frame only if the largest frame still
  fits and otherwise drops it whole, so a frame is never cut short.  A
  dropped or lost frame costs its record's answer, and the host sends it
  again.
* **The record buffer holds a whole record** (LiteEth's largest depth, 256
  words: base address, 253 writes, return address, one read; or return
  address and 255 reads), so the master never waits on a half-received
  record.
* **A record with writes and reads reads the right words.**  LiteEth's
  record receiver latches the return address that follows a record's writes
  but does not take it out of its FIFO (``RECEIVE_BASE_RET_ADDR`` never
  asserts ``ready``): the return address becomes the first read's address,
  the last read address stays behind and the next record is parsed from the
  wrong word (writes land at garbage addresses, the master hangs holding the
  bus).  LiteX's own clients never send such records, so it went unnoticed.
  :func:`add_etherbone_host` adds the missing pop to the receiver's FSM.
* **A packet FIFO stores a packet's parameters once.**  LiteX's
  ``PacketFIFO`` writes a packet's parameters (an Etherbone record's counts)
  on its last beat whether or not the payload FIFO takes that beat; when the
  payload FIFO is full then (records queued behind a master the bus keeps
  waiting), the beat is offered again and the parameters are written twice:
  a phantom record follows, parsed from the next record's words -- lost
  answers, then a master hung mid-record holding the bus.  The fix
  (:func:`_store_params_once`, on Etherbone's three packet FIFOs) writes the
  parameters only with the beat.  With one record in flight the payload FIFO
  is never full, which is why it shows only with a window.
"""

from __future__ import annotations

from migen import ClockDomainsRenamer, If, Signal

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import AutoCSR, CSRStatus

from atomflash import spec

__all__ = ["add_etherbone_host", "RxFrameBuffer", "RECORD_BUFFER_WORDS", "RX_BUFFER_BYTES"]

RECORD_BUFFER_WORDS = 256   # LiteEth's largest: a whole record
RX_BUFFER_BYTES = 8192      # received frames: the host's window (spec.ETHERBONE.window) of full frames and more
MAX_FRAME_BYTES = 1536      # the largest frame the buffer must have room for before it takes one


class RxFrameBuffer(LiteXModule, AutoCSR):
    """``phy`` as LiteEth sees it, with its received frames through a FIFO of
    ``depth`` bytes in its receive clock domain: a frame enters only if
    ``max_frame`` bytes are free when it starts, else it is dropped whole.
    Transmit passes straight through.  CSRs ``frames`` and ``dropped`` count
    the frames received and those dropped (in the receive domain; read them
    while the link is quiet)."""

    def __init__(self, phy, depth: int = RX_BUFFER_BYTES, max_frame: int = MAX_FRAME_BYTES):
        from liteeth.common import eth_phy_description

        self.dw = phy.dw
        for attr in ("with_preamble_crc", "with_padding", "integrated_ifg_inserter"):
            if hasattr(phy, attr):
                setattr(self, attr, getattr(phy, attr))
        self.sink = phy.sink
        self.source = source = stream.Endpoint(eth_phy_description(phy.dw))
        self.frames = CSRStatus(32, description="frames received from the PHY")
        self.dropped = CSRStatus(32, description="frames dropped whole: the buffer had no room")
        frames, dropped = self.frames.status, self.dropped.status

        # # #

        fifo = stream.SyncFIFO(eth_phy_description(phy.dw), depth, buffered=True)
        self.fifo = ClockDomainsRenamer("eth_rx")(fifo)
        rx = phy.source
        in_frame, dropping, room = Signal(), Signal(), Signal()
        # room from a register, a byte on the safe side: the FIFO's level is a sum, and the sum, this
        # compare and the FIFO's own level update behind the write did not fit a 125 MHz cycle
        self.sync.eth_rx += room.eq(fifo.level < depth - max_frame)
        self.comb += [
            rx.connect(fifo.sink, omit={"valid", "ready"}),
            fifo.sink.valid.eq(rx.valid & ((~in_frame & room) | (in_frame & ~dropping))),
            rx.ready.eq(1),
            fifo.source.connect(source),
        ]
        self.sync.eth_rx += If(rx.valid,
                               If(~in_frame,
                                  frames.eq(frames + 1),
                                  dropping.eq(~room),
                                  If(~room, dropped.eq(dropped + 1))),
                               in_frame.eq(~rx.last))


def _store_params_once(fifo) -> None:
    """LiteX ``PacketFIFO``: write the parameters only when the payload FIFO takes the last beat
    (this comb statement comes after the FIFO's own and so wins)."""
    fifo.comb += fifo.param_fifo.sink.valid.eq(fifo.sink.valid & fifo.sink.last & fifo.payload_fifo.sink.ready)


def add_etherbone_host(soc, phy, address: spec.EtherboneLink = spec.ETHERBONE) -> None:
    """LiteEth's UDP/IP core (ARP, ICMP echo, UDP) on ``phy`` (through an
    :class:`RxFrameBuffer`) and Etherbone as a second host bus master beside the
    debug port, answering at ``address``.  The core's datapath is 32 bits on the
    system clock: at a board's 60 MHz it moves 240 MB/s, above gigabit Ethernet's
    125 (an 8-bit datapath would cap the link at 60)."""
    from liteeth.phy.model import LiteEthPHYModel

    assert address.window * address.request_frame_bytes <= RX_BUFFER_BYTES - MAX_FRAME_BYTES, \
        "the receive buffer must hold the host's window of requests"
    soc.ethrxbuf = RxFrameBuffer(phy)
    soc.add_etherbone(phy=soc.ethrxbuf, ip_address=address.ip, mac_address=address.mac, udp_port=address.udp_port,
                      data_width=32, buffer_depth=RECORD_BUFFER_WORDS, with_timing_constraints=False)
    if not isinstance(phy, LiteEthPHYModel):   # the constraints add_etherbone would set on the PHY itself
        crg = getattr(phy, "crg", phy)
        soc.platform.add_period_constraint(crg.cd_eth_rx.clk, 1e9 / phy.rx_clk_freq)
        if crg.cd_eth_rx.clk is not crg.cd_eth_tx.clk:
            soc.platform.add_period_constraint(crg.cd_eth_tx.clk, 1e9 / phy.tx_clk_freq)
            soc.platform.add_false_path_constraints(soc.crg.cd_sys.clk, crg.cd_eth_rx.clk, crg.cd_eth_tx.clk)
        else:
            soc.platform.add_false_path_constraints(soc.crg.cd_sys.clk, crg.cd_eth_rx.clk)
    receiver = soc.etherbone.record.receiver
    receiver.fsm.act("RECEIVE_BASE_RET_ADDR",
                     If(receiver.fifo.source.valid, receiver.fifo.source.ready.eq(1)))
    for fifo in (receiver.fifo, soc.etherbone.record.sender.fifo, soc.etherbone.probe.fifo):
        _store_params_once(fifo)
    soc.add_constant("AF_ETHERBONE_IP", address.ip)
    soc.add_constant("AF_ETHERBONE_PORT", address.udp_port)
