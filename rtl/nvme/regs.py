"""The NVMe controller registers: BAR0 from CAP to the last doorbell.

A host drives an NVMe controller through two things only: the registers at the start of BAR0 and
the queues in its own memory.  This block is the first of them.  It holds what the host writes
(CC, AQA, ASQ, ACQ, the interrupt mask), shows what the controller reports (CAP and VS, fixed
when the gateware is built; CSTS, from the controller's inputs) and turns every doorbell write into
one transfer on a stream, so the queue engine sees each tail and head the host publishes, in order.

Every offset and bit comes from ``spec.NVME_REGS``, the one description the host driver, the
reference controller and the firmware share; the block decodes what the spec lists and nothing
else.  A spec register this block does not know stops elaboration, so the map cannot grow
unnoticed.

The PCIe endpoint's BAR0 frontend delivers single-dword accesses with byte enables, as classic
Wishbone cycles.  Every access is acknowledged a cycle after it is presented (an unmapped offset
reads 0 and ignores a write), except a doorbell write: its ack waits until the doorbell stream takes
it, so a busy queue engine stalls the host's write rather than losing it.  Nothing is decided here
about the value written: a tail beyond the queue, or a doorbell of a queue not created, is the queue
engine's to judge (it raises the asynchronous event).

CC is only stored: ``cc_written`` tells the controller that the host wrote it, and the controller
acts on EN and SHN changes and answers through CSTS.  INTMS and INTMC share the one mask (writing
1s sets, resp. clears, bits of it; both read it), for pin and MSI interrupts.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from atomflash import spec
from atomflash.specdsl import Record, u32
from rtl import spec as layouts
from rtl.lib import wishbone

__all__ = ["NvmeRegisters", "register_layout", "doorbell_layout", "compose", "CSS_NVM", "MPS"]

REGS = spec.NVME_REGS

#: CAP.CSS bit 0: the NVM command set
CSS_NVM = spec.NVME.CSS_NVM
#: CAP.MPSMIN = CAP.MPSMAX: the one memory page size, 2**(12 + MPS) bytes
MPS = spec.NVME.PAGE_SHIFT - 12

#: the doorbells: (register, its ``cq`` bit on the stream)
DOORBELLS = (("sq_tail", 0), ("cq_head", 1))


def compose(register: str, **fields: int) -> int:
    """A value of ``register`` from its named bits; a value too wide for its bits is an error."""
    return REGS[register].compose(**fields)


def register_layout(register: str) -> data.StructLayout | int:
    """The layout of ``register`` with the spec's bit names (32 plain bits when it has none), as
    ``rtl.spec`` lays out a record's field."""
    r = REGS[register]
    return layouts.layout_of(Record(r.name, r.doc, [u32(r.name, r.doc, r.bits)])).members[r.name]


def doorbell_layout(queues: int) -> data.StructLayout:
    """A doorbell write: ``queue`` (0 the admin queue), ``cq`` (0: SQ tail, 1: CQ head), ``value``."""
    width = max(b.width for name, _ in DOORBELLS for b in REGS[name].bits)
    return data.StructLayout({"queue": range(queues + 1), "cq": 1, "value": width})


def _writable(register) -> int:
    """The bits of a read/write register that hold what is written (the others read 0)."""
    return sum(b.mask for b in register.bits) if register.bits else 0xFFFF_FFFF


class NvmeRegisters(wiring.Component):
    """BAR0's controller registers and doorbells; see the module docstring.

    Parameters
    ----------
    queues : int
        I/O queue pairs: doorbells for queues 0 (admin) to ``queues``; those the spec's map has beyond
        them are unmapped.
    mqes : int
        CAP.MQES: the largest queue, 0-based (at least 1).
    timeout : int
        CAP.TO: the worst time to ready after CC.EN changes, in 500 ms units.

    Ports
    -----
    bar : In(wishbone.Signature(addr_width=..., data_width=32))
        BAR0 from offset 0 to the last doorbell, word addressed; ``sel`` one bit a byte.
    cc : Out(CC's layout) / cc_written : Out(1)
        CC as the host wrote it (reserved bits 0) / one cycle each time the host writes CC, the cycle
        ``cc`` first shows the new value.
    rdy, cfs, shst, nssro, pp : In (CSTS's bits, one port each)
        CSTS, driven by the controller.
    aqa : Out(AQA's layout) / asq : Out(64) / acq : Out(64)
        The admin queues' sizes and bases, as written.
    int_mask : Out(32)
        The interrupt mask (INTMS sets bits, INTMC clears them).
    doorbell : Out(stream.Signature(doorbell_layout(queues)))
        One transfer per doorbell write, in the order written; the write's ack waits for it.
    """

    def __init__(self, *, queues: int = spec.NVME.IO_QUEUES, mqes: int = spec.NVME.MQES,
                 timeout: int = spec.NVME.TIMEOUT_500MS):
        if not 0 <= queues < REGS["sq_tail"].count:
            raise ValueError(f"queues must be 0..{REGS['sq_tail'].count - 1} (the doorbells BAR0 has)")
        if mqes < 1:
            raise ValueError("MQES is 0-based and at least 1: a queue has two entries or more")
        stride = 4 << spec.NVME.DSTRD
        sq, cq = REGS["sq_tail"], REGS["cq_head"]
        if (sq.offset, cq.offset, sq.stride, cq.stride) != (spec.NVME.DOORBELL_BASE, spec.NVME.DOORBELL_BASE + stride,
                                                            2 * stride, 2 * stride):
            raise ValueError("spec.NVME_REGS's doorbells disagree with NVME.DOORBELL_BASE and NVME.DSTRD")
        self.queues = queues
        self.cap_lo = compose("cap_lo", mqes=mqes, cqr=1, to=timeout)
        self.cap_hi = compose("cap_hi", dstrd=spec.NVME.DSTRD, css=CSS_NVM, mpsmin=MPS, mpsmax=MPS)
        #: byte offset -> (queue, cq) of every doorbell decoded
        self.doorbells = {REGS[name].address(y): (y, is_cq) for name, is_cq in DOORBELLS for y in range(queues + 1)}
        ports = {
            "bar": In(wishbone.Signature(addr_width=bits_for(max(self.doorbells) // 4), data_width=32)),
            "cc": Out(register_layout("cc")), "cc_written": Out(1),
            "aqa": Out(register_layout("aqa")), "asq": Out(64), "acq": Out(64),
            "int_mask": Out(32),
            "doorbell": Out(stream.Signature(doorbell_layout(queues))),
        }
        for b in REGS["csts"].bits:
            assert b.name not in ports, f"CSTS.{b.name} would shadow a port"
            ports[b.name] = In(b.width)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        bar, db = self.bar, self.doorbell

        stored = {r.name: Signal(32, name=r.name) for r in REGS if r.access == "rw"}
        csts = Signal(32)
        for b in REGS["csts"].bits:
            m.d.comb += csts[b.lsb:b.lsb + b.width].eq(getattr(self, b.name))
        readable = {"cap_lo": Const(self.cap_lo, 32), "cap_hi": Const(self.cap_hi, 32),
                    "vs": Const(spec.NVME.VERSION, 32), "csts": csts,
                    "intms": self.int_mask, "intmc": self.int_mask} | stored
        registers = [r for r in REGS if r.name not in dict(DOORBELLS)]
        for r in registers:
            if r.name not in readable or r.count != 1:
                raise NotImplementedError(f"NVMe register {r.name} ({r.access}) has no behaviour here")
        for name, _ in DOORBELLS:
            assert REGS[name].access == "wo"

        m.d.comb += [self.cc.eq(stored["cc"]), self.aqa.eq(stored["aqa"]),
                     self.asq.eq(Cat(stored["asq_lo"], stored["asq_hi"])),
                     self.acq.eq(Cat(stored["acq_lo"], stored["acq_hi"]))]

        # an access is presented until acked; ~ack keeps the ack cycle from starting another
        access = bar.cyc & bar.stb & ~bar.ack
        lanes = Cat(bar.sel[i].replicate(8) for i in range(len(bar.sel)))
        written = bar.dat_w & lanes

        rdata = Signal(32)
        with m.Switch(bar.adr):
            for r in registers:
                with m.Case(r.offset // 4):
                    m.d.comb += rdata.eq(readable[r.name])
        m.d.sync += bar.dat_r.eq(rdata)          # doorbells and holes read 0

        # a doorbell write with none of the value's bytes enabled (a zero-length write) is no doorbell
        value_width = len(db.payload.value)
        value_lanes = (1 << (value_width + 7) // 8) - 1
        is_doorbell = Signal()
        with m.Switch(bar.adr):
            for offset, (queue, is_cq) in self.doorbells.items():
                with m.Case(offset // 4):
                    m.d.comb += [is_doorbell.eq(1), db.payload.queue.eq(queue), db.payload.cq.eq(is_cq)]
        ring = is_doorbell & bar.we & (bar.sel & value_lanes).any()
        m.d.comb += [db.payload.value.eq(written[:value_width]), db.valid.eq(access & ring)]
        m.d.sync += bar.ack.eq(access & (~ring | db.ready))

        m.d.sync += self.cc_written.eq(0)
        with m.If(access & bar.we):
            with m.Switch(bar.adr):
                for r in registers:
                    with m.Case(r.offset // 4):
                        if r.access == "w1s":
                            m.d.sync += self.int_mask.eq(self.int_mask | written)
                        elif r.access == "w1c":
                            m.d.sync += self.int_mask.eq(self.int_mask & ~written)
                        elif r.access == "rw":
                            keep = ~lanes | ~Const(_writable(r), 32)
                            m.d.sync += stored[r.name].eq((stored[r.name] & keep) | (written & ~keep))
                            if r.name == "cc":
                                m.d.sync += self.cc_written.eq(1)
        return m
