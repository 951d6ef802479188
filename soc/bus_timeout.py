"""A bus timeout on every Wishbone master of a crossbar SoC.

LiteX times accesses out only on its shared-bus interconnect (one
``wishbone.Timeout`` on the shared bus, counted in ``ctrl.bus_errors``); its
``Crossbar`` ignores the SoC's ``bus_timeout``, so on the crossbar the
atomflash SoC needs (``soc.atomflash_soc``), an access no slave answers --
an address no region decodes, a slave stuck behind a deadlock -- hangs its
master for good, silently.  :func:`add_master_timeouts` puts a
:class:`MasterTimeout` between each master and the crossbar: after
``cycles`` without an answer it ends the access towards the master and
drops it towards the slaves, and every such end counts in the SoC
controller's ``bus_errors`` CSR (``ctrl_bus_errors_read()`` in the
firmware's ``csr.h``).

How an access ends depends on what the master does with Wishbone ``err``:
the controller's DMA master takes ``err`` (the FTL core completes the
command with a bus error, docs/ftl.md), the CPU and the host port get
LiteX's answer, an ``ack`` with all-ones data, as on LiteX's shared bus.
"""

from migen import Cat, If, Signal
from migen.genlib.misc import WaitTimer

from litex.gen import LiteXModule
from litex.soc.interconnect import wishbone

__all__ = ["MasterTimeout", "add_master_timeouts", "DEFAULT_TIMEOUT_CYCLES"]

DEFAULT_TIMEOUT_CYCLES = 1 << 17  # 1.3 ms at 100 MHz: far past any access that waits for a page-buffer port


class MasterTimeout(LiteXModule):
    """``master`` -> ``self.bus`` (the crossbar's side), ending an access no
    slave has answered within ``cycles`` (with ``err`` if ``use_err``, else
    an ``ack`` with all-ones data); ``error`` is high for the cycle it ends."""

    def __init__(self, master: wishbone.Interface, cycles: int, *, use_err: bool):
        self.bus = bus = wishbone.Interface.like(master)
        self.error = Signal()
        self.timer = timer = WaitTimer(cycles)
        # A master may still show the ended access the cycle after its answer (Wishbone slaves
        # answer once per access for the same reason): that cycle neither reaches the slaves nor
        # counts, and the timer starts again after it, so one access ends once.
        # (WaitTimer's `done` also stays up that cycle: its count restarts only at the cycle's end.)
        ended, after = Signal(), Signal()
        self.sync += after.eq(ended)
        self.comb += [
            master.connect(bus),
            timer.wait.eq(master.cyc & master.stb & ~bus.ack & ~bus.err & ~after),
            ended.eq(timer.done & ~after),
            If(ended | after,
               bus.cyc.eq(0), bus.stb.eq(0)),   # the slaves see the access dropped
            If(ended,
               master.dat_r.eq((1 << len(master.dat_r)) - 1),
               master.ack.eq(0 if use_err else 1), master.err.eq(1 if use_err else 0),
               self.error.eq(1)),
        ]


def add_master_timeouts(soc, cycles: int = DEFAULT_TIMEOUT_CYCLES, *, err_masters=()):
    """Wrap every master ``soc.bus`` holds in a :class:`MasterTimeout` (call
    it after the last ``add_master``, before the bus is finalized); the
    masters named in ``err_masters`` are answered with ``err``.  Their ends
    count in ``soc.ctrl``'s ``bus_errors``; ``soc.h`` gets
    ``BUS_TIMEOUT_CYCLES``."""
    errors = []
    for name, master in list(soc.bus.masters.items()):
        timeout = MasterTimeout(master, cycles, use_err=name in err_masters)
        setattr(soc, f"{name}_timeout", timeout)
        soc.bus.masters[name] = timeout.bus
        errors.append(timeout.error)
    if hasattr(soc, "ctrl") and hasattr(soc.ctrl, "bus_error"):
        soc.comb += soc.ctrl.bus_error.eq(Cat(*errors) != 0)
    soc.add_constant("BUS_TIMEOUT_CYCLES", cycles)
