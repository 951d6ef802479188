"""Sharing one channel's page-buffer port (the FTL side) between users.

The log writer fills slots before programs, the read path drains them after
reads, the firmware inspects them; each needs the channel's 32-bit buffer
port (``rtl.nand.pagebuf.BufferPortSignature``) for a burst of words at a
time.  The port is a plain RAM port without a handshake, so ownership is
explicit: a user raises ``request`` and may drive the port from the cycle
after ``grant`` rises until it drops ``request``.  Grants go round-robin and
change only while the owner is not requesting, so a burst is never split;
read data (``rtl.nand.pagebuf.HOST_READ_LATENCY`` cycles after the address)
reaches every user, only the owner's address and writes reach the memory.

The page buffer takes the port through registers, in order, so handing it
over needs no care: a read still on its way when its owner lets go arrives
all the same (every user sees ``r_data``), and the last writes of one owner
are in the memory before any access of the next reaches it.
"""

from amaranth import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.lib.roundrobin import round_robin
from rtl.nand.pagebuf import ArbitratedBufferSignature, BufferPortSignature

__all__ = ["BufferPortArbiter", "ArbitratedBufferSignature", "held_grant"]


def held_grant(m: Module, users, channel, holding) -> Signal:
    """The grant of ``users[channel]`` through a register, for a user that keeps ``holding`` (its
    request) up from the cycle it starts waiting until it is done with the port.

    The grant comes from the channel's arbiter, across the core from most of its users; taken
    through a register it ends no long path in the user's state machine.  Only a grant seen while
    the user was already holding counts: the arbiter never moves the port away from a user that
    keeps requesting, so that grant still stands, whereas one seen in the cycle after a release is
    the previous hold's.  A user must therefore spend a cycle without holding between two holds
    (every state machine here passes through another state between pages)."""
    granted = Signal()
    m.d.sync += granted.eq(holding & Array(u.grant for u in users)[channel])
    return granted


class BufferPortArbiter(wiring.Component):
    """``n`` users onto one page-buffer port.

    Ports
    -----
    users : In(ArbitratedBufferSignature).array(n)
    buf : Out(BufferPortSignature)
        To the channel's page buffer.
    """

    def __init__(self, n: int, addr_width: int):
        if n < 1:
            raise ValueError("need at least one user")
        self.n = n
        super().__init__({
            "users": In(ArbitratedBufferSignature(addr_width)).array(n),
            "buf": Out(BufferPortSignature(addr_width, 32)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n
        owner = Signal(range(max(n, 2)))
        owned = Signal()            # the owner holds the port (its grant is up)
        for i, u in enumerate(self.users):
            m.d.comb += [u.port.r_data.eq(self.buf.r_data), u.grant.eq(owned & (owner == i))]
            with m.If(owned & (owner == i)):
                m.d.comb += [self.buf.addr.eq(u.port.addr), self.buf.w_en.eq(u.port.w_en),
                             self.buf.w_data.eq(u.port.w_data)]
        requests = [u.request for u in self.users]
        following, any_ = round_robin(m, requests, owner, n)
        with m.If(owned):
            for i in range(n):
                with m.If((owner == i) & ~requests[i]):
                    m.d.sync += owned.eq(0)     # released: arbitrate again next cycle
        with m.Elif(any_):
            # the next requester after the last owner
            m.d.sync += [owner.eq(following), owned.eq(1)]
        return m
