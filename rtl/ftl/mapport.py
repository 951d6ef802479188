"""Sharing the MapCache between the publisher, the read path and the firmware.

A user raises ``lock`` and, once ``grant`` is up, owns the cache's request
and response streams until it drops ``lock``.  Owning the port for several
requests is what makes a group's publication atomic to readers: the
publisher holds it across a whole group, a reader across all the lookups of
one command, so a read sees none or all of any group.
"""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.lib.roundrobin import round_robin

from .mapcache import RESPONSE, request_layout

__all__ = ["MapPortSignature", "MapPortArbiter"]


class MapPortSignature(wiring.Signature):
    """A user's side of the map port."""

    def __init__(self, lba_bits: int):
        super().__init__({
            "lock": Out(1),
            "grant": In(1),
            "req": Out(stream.Signature(request_layout(lba_bits))),
            "resp": In(stream.Signature(RESPONSE)),
        })


class MapPortArbiter(wiring.Component):
    """``n`` users onto one MapCache, whole lock periods at a time, round robin.

    Ports
    -----
    users : In(MapPortSignature).array(n)
    req : Out(stream of MapCache requests) / resp : In(stream of MapCache responses)
    """

    def __init__(self, n: int, lba_bits: int):
        self.n = n
        super().__init__({
            "users": In(MapPortSignature(lba_bits)).array(n),
            "req": Out(stream.Signature(request_layout(lba_bits))),
            "resp": In(stream.Signature(RESPONSE)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n
        owner = Signal(range(max(n, 2)))
        owned = Signal()
        locks = [u.lock for u in self.users]
        following, any_ = round_robin(m, locks, owner, n)
        for i, u in enumerate(self.users):
            mine = owned & (owner == i)
            m.d.comb += [u.grant.eq(mine), u.resp.payload.eq(self.resp.payload)]
            with m.If(mine):
                m.d.comb += [self.req.payload.eq(u.req.payload), self.req.valid.eq(u.req.valid),
                             u.req.ready.eq(self.req.ready), u.resp.valid.eq(self.resp.valid),
                             self.resp.ready.eq(u.resp.ready)]
                with m.If(~u.lock):
                    m.d.sync += owned.eq(0)
        with m.If(~owned & any_):
            m.d.sync += [owner.eq(following), owned.eq(1)]
        return m
