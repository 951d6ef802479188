"""SoC memory behind a classic Wishbone initiator port (``rtl.lib.wishbone``), for Amaranth pysim benches.

:class:`WishboneMemoryModel` is what the SoC's RAM is to a block with a Wishbone initiator port in a
unit bench: byte-addressable storage answered one classic cycle at a time, with seeded random wait
states so a block that counts on a fixed latency fails.  Use it like this::

    mem = WishboneMemoryModel(dut.mem, 64 * 1024, seed=1, base=0x4000_0000)
    sim.add_process(mem.process)
    ...
    mem.write(0x4000_0100, raw)      # the bench's own view of the memory: no bus cycle
    mem.error_at(range(0x4000_0200, 0x4000_0204))   # accesses there now end with err

Timing: an access (``cyc`` and ``stb`` high) seen on a clock edge is answered with ``ack`` (or
``err``) for the next cycle, so with no wait states a classic initiator that starts its next access
the cycle after ``ack`` moves a word every two cycles, the most classic Wishbone allows a registered
target.  With probability ``wait`` an access first waits 1..``max_wait`` cycles more.  The edge that
sees an access's ``ack`` also sees the access still asserted; the model knows it as answered and does
not take it twice.  The model alone drives ``ack``, ``err`` and ``dat_r`` (it tells pysim of changes
only).

Bursts: on a port with ``cti`` (``wishbone.Signature(burst=True)``), an access tagged incrementing is
answered as LiteX's bursting SRAM answers it, with share ``burst``: the next word's ``ack`` (a read's
data, or ``err`` where :meth:`error_at` refuses it) comes in the cycle right after, before the
initiator shows that access, so a word moves every cycle.  The initiator may drop ``stb`` instead (the
early answer is then ignored and nothing is written); showing another address is a violation.
Accesses not tagged, and the other ``1 - burst``, are answered classically (a target that does not
burst); a burst never waits.  ``bursts`` counts the words answered early.

Checks, each failing the simulation with :class:`WishboneViolation` (an ``AssertionError``) naming the
access: ``sel`` 0xF (the model takes whole 32-bit words only), ``stb`` only inside ``cyc``, the word
inside the memory (``base`` .. ``base + size``), and an access not changed nor withdrawn while it
waits for its answer.

:meth:`error_at` makes every access whose word lies in a byte range end with ``err``: a write there
stores nothing, a read returns no data.  Counters: ``reads``, ``writes`` (accesses acked),
``errors`` (accesses ended with ``err``), ``waits`` (accesses that waited).
"""

from __future__ import annotations

import random

from amaranth import Cat

from rtl.lib.wishbone import CTI_INCREMENTING

__all__ = ["WishboneMemoryModel", "WishboneViolation"]


class WishboneViolation(AssertionError):
    """The initiator broke the classic Wishbone protocol or left the memory."""


class WishboneMemoryModel:
    """Answers the classic Wishbone initiator port ``port`` from byte storage; see the module docstring.

    Parameters
    ----------
    port
        The initiator's port (e.g. ``dut.mem``): 32-bit data, word addressed.
    size_or_bytes : int or bytes
        The memory's size in bytes (zeroed), or its initial contents.
    seed : int
        Seeds every random timing choice.
    wait, max_wait : float, int
        The share of accesses that wait 1..``max_wait`` cycles before their answer.
    base : int
        The byte address of the memory's first byte on the bus (dword aligned).
    burst : float
        The share of incrementing-tagged accesses whose next word is answered in the following
        cycle (ports with ``cti`` only).
    """

    def __init__(self, port, size_or_bytes, *, seed: int = 0, wait: float = 0.25, max_wait: int = 3,
                 base: int = 0, burst: float = 1.0):
        if len(port.dat_w) != 32 or len(port.sel) != 4:
            raise ValueError("the model answers 32-bit ports with byte lanes")
        if base % 4:
            raise ValueError(f"base {base:#x} is not dword aligned")
        self.port = port
        self.data = bytearray(size_or_bytes) if isinstance(size_or_bytes, int) else bytearray(size_or_bytes)
        if len(self.data) % 4:
            raise ValueError(f"a memory of {len(self.data)} bytes is not whole words")
        self.base = base
        self.rng = random.Random(seed)
        self.wait, self.max_wait = wait, max_wait
        self.burst = burst if hasattr(port, "cti") else 0.0
        self.reads = self.writes = self.errors = self.waits = self.bursts = 0
        self._errors: list[range] = []

    @property
    def size(self) -> int:
        return len(self.data)

    # -- the bench's view: no bus cycles -----------------------------------------------------------
    def _offset(self, addr: int, n: int) -> int:
        if not (self.base <= addr and addr + n <= self.base + self.size):
            raise IndexError(f"{addr:#x}+{n} is outside the memory ({self.base:#x}+{self.size:#x})")
        return addr - self.base

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes at byte address ``addr``."""
        at = self._offset(addr, n)
        return bytes(self.data[at:at + n])

    def write(self, addr: int, data: bytes) -> None:
        """Store ``data`` at byte address ``addr``."""
        at = self._offset(addr, len(data))
        self.data[at:at + len(data)] = data

    def error_at(self, byte_range: range) -> None:
        """Accesses to any word overlapping ``byte_range`` end with ``err`` from now on."""
        self._errors.append(byte_range)

    def clear_errors(self) -> None:
        self._errors.clear()

    def _refused(self, addr: int) -> bool:
        return any(r.start < addr + 4 and addr < r.stop for r in self._errors)

    # -- the process --------------------------------------------------------------------------------
    async def process(self, ctx):
        """The model's pysim process: ``sim.add_process(model.process)``."""
        p = self.port
        shown = {"ack": 0, "err": 0}

        def show(name, value):
            if shown[name] != value:
                shown[name] = value
                ctx.set(getattr(p, name), value)

        ctx.set(p.ack, 0)
        ctx.set(p.err, 0)
        pending = None        # the access waiting for its answer: (adr, we, sel, dat_w)
        wait = 0
        answered = False      # the last edge answered: this one still sees that access
        early = None          # a burst's next word, answered before the initiator showed it: (adr, we, err)
        controls = Cat(p.cyc, p.stb, p.we, p.sel, *((p.cti,) if self.burst else ()))
        # one sample of the control bits and one of each wide value: pysim's cost is per value sampled
        async for _, _, bits, adr, dat_w in ctx.tick().sample(controls, p.adr, p.dat_w):
            cyc, stb, we, sel = bits & 1, bits >> 1 & 1, bits >> 2 & 1, bits >> 3 & 0xF
            incrementing = self.burst and bits >> 7 == CTI_INCREMENTING
            show("ack", 0)
            show("err", 0)
            if stb and not cyc:
                raise WishboneViolation(f"Wishbone: stb without cyc at word {adr:#x}")
            if early is not None:
                want, want_we, refused = early
                early = None
                if not stb:
                    continue                      # the burst ended: the early answer is ignored
                if (adr, we) != (want, want_we):
                    raise WishboneViolation(f"Wishbone: a burst's next access is {self._name(adr, we, sel, dat_w)}, "
                                            f"not the {'write' if want_we else 'read'} of word {want:#x}")
                if sel != 0xF:
                    raise WishboneViolation(f"Wishbone: {self._name(adr, we, sel, dat_w)}: sel is not 0xF")
                if refused:
                    self.errors += 1
                else:
                    self._take(adr, we, dat_w)
                    self.bursts += 1
                if incrementing and not refused and self.rng.random() < self.burst:
                    early = self._answer_early(ctx, show, adr + 1, we)
                continue
            if answered:
                answered = False
                if incrementing and self.rng.random() < self.burst:
                    early = self._answer_early(ctx, show, adr + 1, we)
                continue
            if not stb:
                if pending is not None:
                    raise WishboneViolation(f"Wishbone: {self._name(*pending)} withdrawn before its answer")
                continue
            access = (adr, we, sel, dat_w if we else 0)
            if pending is None:
                pending = access
                if self.rng.random() < self.wait:
                    wait = self.rng.randint(1, self.max_wait)
                    self.waits += 1
            elif access != pending:
                raise WishboneViolation(f"Wishbone: {self._name(*pending)} changed to {self._name(*access)} "
                                        "before its answer")
            if wait:
                wait -= 1
                continue
            self._answer(ctx, show, *pending)
            pending, answered = None, True

    def _answer_early(self, ctx, show, adr, we):
        """A burst's next word, answered in the coming cycle: (adr, we, refused), or None past the memory's
        end (the initiator's access there, if it comes, is then answered as any other)."""
        addr = 4 * adr
        if not self.base <= addr < self.base + self.size:
            return None
        if self._refused(addr):
            show("err", 1)
            return adr, we, True
        if not we:
            at = addr - self.base
            ctx.set(self.port.dat_r, int.from_bytes(self.data[at:at + 4], "little"))
        show("ack", 1)
        return adr, we, False

    def _take(self, adr, we, dat_w) -> None:
        at = 4 * adr - self.base
        if we:
            self.data[at:at + 4] = dat_w.to_bytes(4, "little")
            self.writes += 1
        else:
            self.reads += 1

    def _name(self, adr, we, sel, dat_w) -> str:
        what = f"write of {dat_w:#010x} to" if we else "read of"
        return f"{what} word {adr:#x} (byte {4 * adr:#x}, sel {sel:#x})"

    def _answer(self, ctx, show, adr, we, sel, dat_w) -> None:
        addr = 4 * adr
        if sel != 0xF:
            raise WishboneViolation(f"Wishbone: {self._name(adr, we, sel, dat_w)}: sel is not 0xF")
        if not self.base <= addr < self.base + self.size:
            raise WishboneViolation(f"Wishbone: {self._name(adr, we, sel, dat_w)} outside the memory "
                                    f"({self.base:#x}+{self.size:#x})")
        if self._refused(addr):
            self.errors += 1
            show("err", 1)
            return
        at = addr - self.base
        if we:
            self.data[at:at + 4] = dat_w.to_bytes(4, "little")
            self.writes += 1
        else:
            ctx.set(self.port.dat_r, int.from_bytes(self.data[at:at + 4], "little"))
            self.reads += 1
        show("ack", 1)
