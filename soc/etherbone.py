"""The drive's host link on Ethernet: LiteEth's UDP/IP core with LiteX's
Etherbone as a host bus master, for the simulated SoC (on LiteEth's PHY
model) and for Ethernet boards (on their PHY) alike.

Etherbone packets carry one record each: up to 255 writes to consecutive
words, then up to 255 reads of any words, answered with the words read.  The
host library (``atomflash.transport.EtherboneTransport``) sends one record at
a time and makes every record answer: a read, or writes with a read of their
own last word behind them, so the answer says the words are written.

Two things LiteEth needs for that, both set here:

* **The record buffer holds a whole record.**  LiteEth's PHY cannot be held
  off: a record that arrives while the bus keeps the Etherbone master waiting
  (the controller's DMA burst into host memory has it) must fit in the
  receiver's FIFO, or its words are lost.  Its largest depth, 256 words, holds
  the largest record the host sends (base address, 253 writes, return
  address, one read; or return address and 255 reads).
* **A record with writes and reads reads the right words.**  LiteEth's
  record receiver latches the return address that follows a record's writes
  but does not take it out of its FIFO (``RECEIVE_BASE_RET_ADDR`` never
  asserts ``ready``): the return address becomes the first read's address,
  the last read address stays behind and the next record is parsed from the
  wrong word (writes land at garbage addresses, the master hangs holding the
  bus).  LiteX's own clients never send such records, so it went unnoticed.
  :func:`add_etherbone_host` adds the missing pop to the receiver's FSM.
"""

from __future__ import annotations

from migen import If

from atomflash import spec

__all__ = ["add_etherbone_host", "RECORD_BUFFER_WORDS"]

RECORD_BUFFER_WORDS = 256   # LiteEth's largest: a whole record


def add_etherbone_host(soc, phy, address: spec.EtherboneLink = spec.ETHERBONE) -> None:
    """LiteEth's UDP/IP core (ARP, ICMP echo, UDP) on ``phy`` and Etherbone as a
    second host bus master beside the debug port, answering at ``address``."""
    soc.add_etherbone(phy=phy, ip_address=address.ip, mac_address=address.mac, udp_port=address.udp_port,
                      data_width=8, buffer_depth=RECORD_BUFFER_WORDS)
    receiver = soc.etherbone.record.receiver
    receiver.fsm.act("RECEIVE_BASE_RET_ADDR",
                     If(receiver.fifo.source.valid, receiver.fifo.source.ready.eq(1)))
    soc.add_constant("AF_ETHERBONE_IP", address.ip)
    soc.add_constant("AF_ETHERBONE_PORT", address.udp_port)
