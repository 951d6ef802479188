"""The NVMe controller's side of ``soc.pcie.HostDmaPort``, driven from cocotb on the
simulation top's ``hdp_*`` ports (``sim.pcie.gen.host_dma_port_ios``).

:meth:`HostDmaPortDriver.transfer` runs one request of the ``HostDmaSignature``
protocol (``rtl/nvme/hostdma.py``) cycle by cycle: it offers the request and, for a
write, the words (with random gaps before a word when ``wgap`` > 0), takes the
read words (``rdata.ready`` low at random when ``rstall`` > 0) and ``done``, and
checks the protocol as an initiator sees it: exactly ``bytes / 4`` read words,
``last`` on the final one only, ``error`` nowhere but there, ``done`` after the
last word, the port not taking the next request before.  It returns a
:class:`Transfer`: the data read, ``done.error``, and the cycles from the request
to ``done``.

Per-cycle Python costs wall-clock time (the model already runs every cycle):
keep the bytes moved to a few dozen KiB a test.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from cocotb.triggers import ReadOnly, RisingEdge

from sim.pcie.gen import HOST_DMA_PORT_NAMES

INPUTS = [n for n in HOST_DMA_PORT_NAMES if n.endswith(("req_valid", "req_write", "req_addr", "req_bytes",
                                                        "wdata_valid", "wdata_last", "wdata_data",
                                                        "wdata_error", "rdata_ready", "done_ready"))]


@dataclass
class Transfer:
    data: bytes          # a read's words, little-endian; empty for a write
    error: bool          # done.error
    cycles: int          # from the request's first cycle offered to done taken


class HostDmaPortDriver:
    def __init__(self, dut, seed: int = 0):
        self.dut = dut
        self.clk = dut.user_clk
        self.rng = random.Random(seed)
        self.sig = {n[4:]: getattr(dut, n) for n in HOST_DMA_PORT_NAMES}   # by name (see PcieTB)

    def idle(self):
        """Every input of the port low: no request, no word, nothing taken."""
        for n in INPUTS:
            getattr(self.dut, n).value = 0

    async def transfer(self, write: bool, addr: int, nbytes: int, data: bytes = b"",
                       wgap: float = 0.0, rstall: float = 0.0, max_cycles: int = 20000) -> Transfer:
        s, rng = self.sig, self.rng
        assert not write or len(data) == nbytes
        words = list(struct.unpack(f"<{nbytes // 4}I", data)) if write else []
        nwords = nbytes // 4
        req_pending, w_next, w_offered = True, 0, False
        got, done_error, read_error, cycle = [], None, False, 0
        # start just after an edge: a value written in the time step of an edge (a Timer can land
        # there) may or may not be seen by that edge
        await RisingEdge(self.clk)
        s["req_write"].value = int(write)
        s["req_addr"].value = addr
        s["req_bytes"].value = nbytes
        s["done_ready"].value = 1
        while done_error is None:
            cycle += 1
            assert cycle < max_cycles, f"{'write' if write else 'read'} {addr:#x}+{nbytes}: no done in {max_cycles} cycles " \
                                       f"({len(got)} words read, {w_next} written)"
            s["req_valid"].value = int(req_pending)
            if write and not w_offered and w_next < len(words) and rng.random() >= wgap:
                w_offered = True
            s["wdata_valid"].value = int(w_offered)
            if w_offered:
                s["wdata_data"].value = words[w_next]
                s["wdata_last"].value = int(w_next == len(words) - 1)
            s["rdata_ready"].value = int(rng.random() >= rstall)
            await ReadOnly()
            took_req = req_pending and s["req_ready"].value
            took_word = w_offered and s["wdata_ready"].value
            assert req_pending or not s["req_ready"].value, "the port would take a request before done"
            if s["rdata_valid"].value and s["rdata_ready"].value:
                assert not write, "read words during a write"
                last, err = int(s["rdata_last"].value), int(s["rdata_error"].value)
                got.append(int(s["rdata_data"].value))
                assert last == (len(got) == nwords), f"rdata.last {last} on word {len(got)} of {nwords}"
                assert not err or last, f"rdata.error on word {len(got)} of {nwords}, not the last"
                read_error = bool(err)
            if s["done_valid"].value:
                assert not req_pending, "done before the request was taken"
                if write:
                    assert w_next == len(words), f"done after {w_next} of {len(words)} words"
                else:
                    assert len(got) == nwords, f"done after {len(got)} of {nwords} words"
                    assert bool(int(s["done_error"].value)) == read_error, "rdata.error and done.error disagree"
                done_error = bool(int(s["done_error"].value))
            await RisingEdge(self.clk)
            if took_req:
                req_pending = False
            if took_word:
                w_next += 1
                w_offered = False
        self.idle()
        return Transfer(data=struct.pack(f"<{len(got)}I", *got), error=done_error, cycles=cycle)

    async def write(self, addr: int, data: bytes, **kw) -> Transfer:
        return await self.transfer(True, addr, len(data), data, **kw)

    async def read(self, addr: int, nbytes: int, **kw) -> Transfer:
        return await self.transfer(False, addr, nbytes, **kw)
