"""Buffer DMA (rtl/ftl/dma.py) with a real page buffer, under cocotb."""

from pathlib import Path

from amaranth import Module
from amaranth.lib import wiring

from rtl.ftl.dma import BufferDMA
from rtl.nand.pagebuf import PageBuffer
from sim.harness import runner

HERE = Path(__file__).parent
SLOTS, SLOT_BYTES = 2, 2048 + 128


class DMAWithBuffer(wiring.Component):
    """Test top: the DMA's buffer port wired to a PageBuffer; its byte-wide
    channel port is left to the test for checking and preloading."""

    def __init__(self):
        self.pagebuf = PageBuffer(SLOTS, SLOT_BYTES)
        self.dma = BufferDMA(self.pagebuf.host.addr.shape().width)
        dma, buf = self.dma.signature.members, self.pagebuf.signature.members
        super().__init__({"req": dma["req"], "done": dma["done"], "bus": dma["bus"], "chan": buf["chan"]})

    def elaborate(self, platform):
        m = Module()
        m.submodules.pagebuf = self.pagebuf
        m.submodules.dma = self.dma
        wiring.connect(m, self.dma.buf, self.pagebuf.host)
        wiring.connect(m, wiring.flipped(self.req), self.dma.req)
        wiring.connect(m, self.dma.done, wiring.flipped(self.done))
        wiring.connect(m, self.dma.bus, wiring.flipped(self.bus))
        wiring.connect(m, wiring.flipped(self.chan), self.pagebuf.chan)
        return m


def test_dma():
    verilog = runner.amaranth_verilog(DMAWithBuffer(), "buffer_dma")
    runner.run(toplevel="buffer_dma", sources=[verilog], test_module="cocotb_dma",
               build_name="buffer_dma", test_dir=HERE,
               extra_env={"SLOTS": str(SLOTS), "SLOT_BYTES": str(SLOT_BYTES)})
