"""What a drive top shares: a host-interface front end in front of an :class:`~rtl.ftl.core.FtlCore`.

A drive (``rtl/nvme/drive.py``, ``rtl/sata/drive.py``) puts a front end on the core's stream queues
and shares one SoC memory port between them.  Every other port of the core stays on the drive under
its own name, so whatever plays the firmware for a bare core (``tb/ftl_core``, the SoC's bridge)
plays it for a drive too, and the core's build parameters read through the drive.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.lib import wishbone

__all__ = ["CORE_PARAMETERS", "FRONT_PORTS", "CoreFront", "core_members", "connect_core_ports"]

#: the core's build parameters a drive answers for, so what builds around a core (soc/ftl_bridge.py)
#: builds around a drive
CORE_PARAMETERS = ("alloc", "cache_pages", "channels", "fw_slot", "limits", "map_segments", "max_appends",
                   "max_open_tx", "max_pending", "params", "profile", "queue_pairs", "slot_words", "slots", "ways",
                   "buf_addr_width", "queue_ids")
#: the core's ports the front end and the memory arbiter take; the drive does not pass them on
FRONT_PORTS = ("stream_cmd", "stream_cpl", "mem")


def memory_port():
    """The drive's one SoC memory port (the core's and the front end's, arbitrated)."""
    return Out(wishbone.Signature(addr_width=30, data_width=32, burst=True))


def core_members(core) -> dict:
    """The core's signature members a drive carries as they are."""
    return {name: member for name, member in core.signature.members.items() if name not in FRONT_PORTS}


def _pass(m, member, ours, theirs):
    """A sub-interface of the core (a stream, a Wishbone port, an array of them), as it is."""
    if isinstance(ours, (list, tuple)):
        for a, b in zip(ours, theirs):
            _pass(m, member, a, b)
    elif member.flow == In:
        wiring.connect(m, wiring.flipped(ours), theirs)
    else:
        wiring.connect(m, theirs, wiring.flipped(ours))


def connect_core_ports(m, drive, core):
    """Join each of ``core_members(core)`` on ``drive`` to the core's port of the same name."""
    for name, member in core_members(core).items():
        ours, theirs = getattr(drive, name), getattr(core, name)
        if member.is_port:
            if member.flow == In:
                m.d.comb += theirs.eq(ours)
            else:
                m.d.comb += ours.eq(theirs)
        else:
            _pass(m, member, ours, theirs)


class CoreFront:
    """Mixin for a drive holding its core in ``self.core``: the core's build parameters read through."""

    def __getattr__(self, name):
        if name in CORE_PARAMETERS:
            return getattr(self.core, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
