"""A deliberately simple ONFI host (SDR, and NV-DDR2 in :class:`NvDdr2Host`), in Python, for the model's tests.

It moves the pins of ``tb_nand_model`` with cocotb Timers -- never per clock
-- so a page costs a few thousand Python wake-ups; tests keep transfers short
(partial pages through the column address).  Every wait is a whole number of
clock periods and pins change half a period away from the model's sampling
edge, so the times the model measures are exactly the times asked for here.

Timing is taken from the ONFI table of ``mode`` (``atomflash.spec``); each
cycle is stretched to the slowest of the parameters that bound it, plus one
period of margin for data output (the model samples RE# a half period late
and makes data valid only after tREA).  Tests that want a violation do not
use these helpers -- they script pins with :meth:`OnfiHost.step`.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import Edge, FallingEdge, First, Timer

from atomflash.spec import (ONFI_NVDDR2_FOR_SDR, ONFI_NVDDR2_TIMING_PS, ONFI_TIMING, OnfiCmd, OnfiFeature, OnfiInterface,
                            OnfiStatus)


class NandTimeout(Exception):
    pass


class OnfiHost:
    def __init__(self, dut, period_ps: int, mode: int = 0):
        self.dut = dut
        self.period_ps = period_ps
        self.target = 0
        self.set_mode(mode)

    # -- time -------------------------------------------------------------
    def set_mode(self, mode: int) -> None:
        self.mode = mode
        self.t = {name: values[mode] for name, values in ONFI_TIMING.items()}

    def cycles(self, ns: float) -> int:
        return max(0, -(-int(round(ns * 1000)) // self.period_ps))

    async def wait(self, ns: float) -> None:
        c = self.cycles(ns)
        if c:
            await Timer(c * self.period_ps, "ps")

    async def align(self) -> None:
        """Move to a falling clock edge (the model samples on rising ones)."""
        await FallingEdge(self.dut.clk)

    # -- pins ---------------------------------------------------------------
    def set(self, **pins) -> None:
        for name, value in pins.items():
            getattr(self.dut, name).value = value

    async def step(self, ns: float = 0, **pins) -> None:
        """Set ``pins`` now, then wait ``ns`` (rounded up to whole periods)."""
        self.set(**pins)
        await self.wait(ns)

    def ce_mask(self, selected: bool) -> int:
        return 0b11 & ~(1 << self.target) if selected else 0b11

    async def select(self, target: int | None = None) -> None:
        if target is not None:
            self.target = target
        await self.align()
        self.set(ce_n=self.ce_mask(True))
        await self.wait(self.t["tCS"])

    async def deselect(self) -> None:
        await self.wait(self.t["tCH"])
        self.set(ce_n=0b11)
        await self.wait(self.period_ps / 1000)

    @property
    def rb(self) -> int:
        return (int(self.dut.rb_n.value) >> self.target) & 1

    # -- bus cycles ---------------------------------------------------------
    async def _write(self, cle: int, ale: int, value: int) -> None:
        t = self.t
        low = max(t["tWP"], t["tCLS"] if cle else 0, t["tALS"] if ale else 0, t["tDS"])
        high = max(t["tWH"], t["tCLH"], t["tALH"], t["tDH"], t["tWC"] - low)
        self.set(cle=cle, ale=ale, dq_i=value, we_n=0)
        await self.wait(low)
        self.set(we_n=1)
        await self.wait(high)
        self.set(cle=0, ale=0)

    async def cmd(self, opcode: int) -> None:
        await self._write(1, 0, int(opcode))

    async def addr(self, *cycles: int) -> None:
        for a in cycles:
            await self._write(0, 1, a & 0xFF)

    async def data_in(self, data: bytes, first_gap_ns: float | None = None, *, repeated: bool = False) -> None:
        """Data input; the first cycle waits tADL (or ``first_gap_ns``) after the last address.
        ``repeated``: NV-DDR2 sends each byte twice (features); SDR once."""
        gap = self.t["tADL"] if first_gap_ns is None else first_gap_ns
        await self.wait(max(0, gap - self._high_ns()))
        for b in data:
            await self._write(0, 0, b)

    def _high_ns(self) -> float:
        t = self.t
        low = max(t["tWP"], t["tCLS"], t["tALS"], t["tDS"])
        return max(t["tWH"], t["tCLH"], t["tALH"], t["tDH"], t["tWC"] - low)

    async def data_out(self, n: int, first_gap_ns: float | None = None, *, repeated: bool = False) -> bytes:
        """``n`` read cycles; the first waits tWHR (or ``first_gap_ns``) after the last WE# rise.
        ``repeated``: NV-DDR2 moves each byte on two edges (ID, parameter page, features); SDR once."""
        t = self.t
        gap = t["tWHR"] if first_gap_ns is None else first_gap_ns
        await self.wait(max(0, gap - self._high_ns()))
        low_c = self.cycles(max(t["tRP"], t["tREA"])) + 1
        high_c = max(self.cycles(t["tREH"]), self.cycles(t["tRC"]) - low_c, 1)
        out = bytearray()
        low_t = Timer(low_c * self.period_ps, "ps")
        high_t = Timer(high_c * self.period_ps, "ps")
        for _ in range(n):
            self.dut.re_n.value = 0
            await low_t
            out.append(int(self.dut.dq.value) & 0xFF)
            self.dut.re_n.value = 1
            await high_t
        await self.wait(t["tRHW"])
        return bytes(out)

    async def wait_ready(self, timeout_ns: float = 50e6) -> None:
        """Wait tWB, then for R/B# high, then tRR."""
        await self.wait(self.t["tWB"])
        if not self.rb:
            edge = Edge(self.dut.rb_n)
            deadline = Timer(int(timeout_ns * 1000), "ps")
            while not self.rb:
                fired = await First(edge, deadline)
                if fired is deadline:
                    raise NandTimeout(f"R/B# of target {self.target} still low after {timeout_ns} ns")
            await self.align()
        await self.wait(self.t["tRR"])

    # -- addressing ---------------------------------------------------------
    @staticmethod
    def col_cycles(col: int) -> tuple[int, int]:
        return col & 0xFF, (col >> 8) & 0xFF

    @staticmethod
    def row_cycles(row: int) -> tuple[int, int, int]:
        return row & 0xFF, (row >> 8) & 0xFF, (row >> 16) & 0xFF

    # -- commands -----------------------------------------------------------
    async def reset(self) -> None:
        await self.select()
        await self.cmd(OnfiCmd.RESET)
        await self.wait_ready()
        await self.deselect()

    async def read_id(self, address: int = 0x00, n: int = 5) -> bytes:
        await self.select()
        await self.cmd(OnfiCmd.READ_ID)
        await self.addr(address)
        data = await self.data_out(n, repeated=True)
        await self.deselect()
        return data

    async def read_param_page(self, n: int = 256) -> bytes:
        await self.select()
        await self.cmd(OnfiCmd.READ_PARAM_PAGE)
        await self.addr(0x00)
        await self.wait_ready()
        data = await self.data_out(n, first_gap_ns=0, repeated=True)
        await self.deselect()
        return data

    async def read_status(self) -> int:
        await self.select()
        await self.cmd(OnfiCmd.READ_STATUS)
        s = (await self.data_out(1))[0]
        await self.deselect()
        return s

    async def read_status_enhanced(self, row: int) -> int:
        await self.select()
        await self.cmd(OnfiCmd.READ_STATUS_ENH)
        await self.addr(*self.row_cycles(row))
        s = (await self.data_out(1))[0]
        await self.deselect()
        return s

    async def set_timing_mode(self, mode: int) -> None:
        await self.select()
        await self.cmd(OnfiCmd.SET_FEATURES)
        await self.addr(OnfiFeature.TIMING_MODE)
        await self.data_in(bytes([mode, 0, 0, 0]), repeated=True)
        await self.wait_ready()
        await self.deselect()
        self.set_mode(mode)

    async def get_features(self, address: int = OnfiFeature.TIMING_MODE) -> bytes:
        await self.select()
        await self.cmd(OnfiCmd.GET_FEATURES)
        await self.addr(address)
        await self.wait_ready()
        data = await self.data_out(4, first_gap_ns=0, repeated=True)
        await self.deselect()
        return data

    async def read(self, row: int, column: int, n: int, *, copyback: bool = False) -> bytes:
        """READ (00h-30h) or COPYBACK READ (00h-35h), then ``n`` bytes from ``column``."""
        await self.select()
        await self.cmd(OnfiCmd.READ_1)
        await self.addr(*self.col_cycles(column), *self.row_cycles(row))
        await self.cmd(OnfiCmd.COPYBACK_READ_2 if copyback else OnfiCmd.READ_2)
        await self.wait_ready()
        data = await self.data_out(n, first_gap_ns=0) if n else b""
        await self.deselect()
        return data

    async def change_read_column(self, column: int, n: int) -> bytes:
        await self.select()
        await self.cmd(OnfiCmd.CHANGE_READ_COL_1)
        await self.addr(*self.col_cycles(column))
        await self.cmd(OnfiCmd.CHANGE_READ_COL_2)
        data = await self.data_out(n, first_gap_ns=200)  # tCCS (model default)
        await self.deselect()
        return data

    async def program(self, row: int, column: int, data: bytes, *, extra: dict[int, bytes] | None = None) -> int:
        """PAGE PROGRAM ``data`` at ``column`` (plus CHANGE WRITE COLUMN chunks in ``extra``); returns status."""
        await self.select()
        await self.cmd(OnfiCmd.PROGRAM_1)
        await self.addr(*self.col_cycles(column), *self.row_cycles(row))
        await self.data_in(data)
        for col, chunk in (extra or {}).items():
            await self.cmd(OnfiCmd.CHANGE_WRITE_COL)
            await self.addr(*self.col_cycles(col))
            await self.data_in(chunk, first_gap_ns=200)  # tCCS
        await self.cmd(OnfiCmd.PROGRAM_2)
        await self.wait_ready()
        await self.cmd(OnfiCmd.READ_STATUS)
        s = (await self.data_out(1))[0]
        await self.deselect()
        return s

    async def copyback_program(self, row: int, patch: dict[int, bytes] | None = None) -> int:
        """COPYBACK PROGRAM: 85h + 5 address cycles, optional data changes (the first at
        the 85h column, the rest through CHANGE WRITE COLUMN), 10h; returns status."""
        chunks = list((patch or {}).items())
        await self.select()
        await self.cmd(OnfiCmd.CHANGE_WRITE_COL)
        await self.addr(*self.col_cycles(chunks[0][0] if chunks else 0), *self.row_cycles(row))
        for i, (col, chunk) in enumerate(chunks):
            if i:
                await self.cmd(OnfiCmd.CHANGE_WRITE_COL)
                await self.addr(*self.col_cycles(col))
            await self.data_in(chunk, first_gap_ns=None if i == 0 else 200)
        await self.cmd(OnfiCmd.PROGRAM_2)
        await self.wait_ready()
        await self.cmd(OnfiCmd.READ_STATUS)
        s = (await self.data_out(1))[0]
        await self.deselect()
        return s

    async def erase(self, row: int) -> int:
        await self.select()
        await self.cmd(OnfiCmd.ERASE_1)
        await self.addr(*self.row_cycles(row))
        await self.cmd(OnfiCmd.ERASE_2)
        await self.wait_ready()
        await self.cmd(OnfiCmd.READ_STATUS)
        s = (await self.data_out(1))[0]
        await self.deselect()
        return s

    # -- multi-plane (each plane but the last confirmed with 11h / 32h / D1h, then tDBSY)
    async def _status_and_deselect(self) -> int:
        await self.cmd(OnfiCmd.READ_STATUS)
        s = (await self.data_out(1))[0]
        await self.deselect()
        return s

    async def program_planes(self, planes: list[tuple[int, int, bytes]], *, wait: bool = True) -> int:
        """Multi-plane PAGE PROGRAM of ``(row, column, data)`` per plane; returns status
        (``wait=False``: returns after the final 10h, still selected)."""
        await self.select()
        for i, (row, column, data) in enumerate(planes):
            last = i == len(planes) - 1
            await self.cmd(OnfiCmd.PROGRAM_1)
            await self.addr(*self.col_cycles(column), *self.row_cycles(row))
            await self.data_in(data)
            await self.cmd(OnfiCmd.PROGRAM_2 if last else OnfiCmd.PROGRAM_MULTI_PLANE)
            if last and not wait:
                return 0
            await self.wait_ready()
        return await self._status_and_deselect()

    async def erase_planes(self, rows: list[int], *, wait: bool = True) -> int:
        """Multi-plane BLOCK ERASE (ONFI 3.0+: 60h-D1h per block, the last 60h-D0h); returns status."""
        await self.select()
        for i, row in enumerate(rows):
            last = i == len(rows) - 1
            await self.cmd(OnfiCmd.ERASE_1)
            await self.addr(*self.row_cycles(row))
            await self.cmd(OnfiCmd.ERASE_2 if last else OnfiCmd.ERASE_MULTI_PLANE)
            if last and not wait:
                return 0
            await self.wait_ready()
        return await self._status_and_deselect()

    async def read_planes(self, rows: list[int], column: int = 0, n: int = 0) -> bytes:
        """Multi-plane READ (00h-32h per plane, the last 00h-30h), then ``n`` bytes of the
        last plane's register from ``column``."""
        await self.select()
        for i, row in enumerate(rows):
            last = i == len(rows) - 1
            await self.cmd(OnfiCmd.READ_1)
            await self.addr(*self.col_cycles(column), *self.row_cycles(row))
            await self.cmd(OnfiCmd.READ_2 if last else OnfiCmd.READ_MULTI_PLANE)
            await self.wait_ready()
        data = await self.data_out(n, first_gap_ns=0) if n else b""
        await self.deselect()
        return data

    async def change_read_column_enhanced(self, row: int, column: int, n: int) -> bytes:
        """06h + column and row (LUN and plane) + E0h, then ``n`` bytes after tCCS."""
        await self.select()
        await self.cmd(OnfiCmd.CHANGE_READ_COL_ENH)
        await self.addr(*self.col_cycles(column), *self.row_cycles(row))
        await self.cmd(OnfiCmd.CHANGE_READ_COL_2)
        data = await self.data_out(n, first_gap_ns=200)  # tCCS (model default)
        await self.deselect()
        return data


class NvDdr2Host(OnfiHost):
    """The same host with ONFI NV-DDR2 data transfers once :meth:`enter_nvddr2` ran.

    Commands and addresses stay WE# cycles (with NV-DDR2's times).  Data
    input drives DQS: low for tWPRE, then an edge per byte in the middle of
    its DQ eye (``dqs_skew`` periods off the middle, for the tests of tDS and
    tDH), held tWPST after the last edge.  Data output toggles RE# after its
    tRPRE preamble and takes DQ at each DQS edge the part sends back.  A byte
    lasts half a tRC, at least two sampling periods (so that DQ and DQS never
    change in one sample): the tests' clock must be fine enough for the mode.
    """

    def __init__(self, dut, period_ps: int, mode: int = 0):
        self.ddr = False
        self.ddr_mode = 0
        self.dqs_skew = 0
        super().__init__(dut, period_ps, mode)

    def set_mode(self, mode: int) -> None:
        super().set_mode(mode)
        self.ddr = False

    def use_nvddr2(self, mode: int) -> None:
        """Drive the bus with NV-DDR2 mode ``mode``'s times from now on (the part switched)."""
        self.ddr, self.ddr_mode = True, mode
        self.d = {name: values[mode] / 1000 for name, values in ONFI_NVDDR2_TIMING_PS.items()}
        self.t = {name: self.d.get(ONFI_NVDDR2_FOR_SDR.get(name, name), values[0])
                  for name, values in ONFI_TIMING.items()}

    async def enter_nvddr2(self, mode: int) -> None:
        """SET FEATURES 01h naming NV-DDR2 ``mode`` (in the interface in use), then tITC."""
        await self.select()
        await self.cmd(OnfiCmd.SET_FEATURES)
        await self.addr(OnfiFeature.TIMING_MODE)
        await self.data_in(bytes([OnfiInterface.NV_DDR2 << 4 | mode, 0, 0, 0]), repeated=True)
        await self.wait_ready()
        await self.deselect()
        self.use_nvddr2(mode)
        await self.wait(self.d["tITC"])

    async def leave_nvddr2(self) -> None:
        """RESET in SDR timing mode 0: ONFI's way back to SDR."""
        self.set_mode(0)
        await self.reset()

    def ui_periods(self) -> int:
        return max(2, self.cycles(self.d["tRC"] / 2))

    async def _periods(self, n: int) -> None:
        if n > 0:
            await Timer(n * self.period_ps, "ps")

    async def data_in(self, data: bytes, first_gap_ns: float | None = None, *, repeated: bool = False) -> None:
        if not self.ddr:
            return await super().data_in(data, first_gap_ns)
        if repeated:
            data = bytes(b for x in data for b in (x, x))
        gap = self.t["tADL"] if first_gap_ns is None else first_gap_ns
        ui = self.ui_periods()
        setup = min(max(ui // 2 + self.dqs_skew, 0), ui)
        pre = max(self.cycles(self.d["tWPRE"]), setup)
        await self.wait(max(0.0, gap - self._high_ns() - pre * self.period_ps / 1000))
        self.set(dqs_i=0, dqs_i_oe=1)
        await self._periods(pre - setup)
        level = 0
        for b in data:
            self.set(dq_i=b)
            await self._periods(setup)
            level ^= 1
            self.set(dqs_i=level)
            await self._periods(ui - setup)
        await self.wait(self.d["tWPST"])
        self.set(dqs_i_oe=0, dqs_i=0)

    async def data_out(self, n: int, first_gap_ns: float | None = None, *, repeated: bool = False) -> bytes:
        if not self.ddr:
            return await super().data_out(n, first_gap_ns)
        edges = 2 * n if repeated else n
        gap = self.t["tWHR"] if first_gap_ns is None else first_gap_ns
        await self.wait(max(0.0, gap - self._high_ns()))
        got: list[int] = []

        async def capture():
            for _ in range(edges):
                await Edge(self.dut.dqs)
                got.append(int(self.dut.dq.value) & 0xFF)

        task = cocotb.start_soon(capture())
        ui = self.ui_periods()
        self.dut.re_n.value = 0
        await self.wait(self.d["tRPRE"])
        level = 0
        for _ in range(edges):
            level ^= 1
            self.dut.re_n.value = level
            await self._periods(ui)
        await self.wait(self.d["tDQSRE"])
        if not level:
            self.dut.re_n.value = 1
        await First(task.join(), Timer(1000, "ns"))
        assert len(got) == edges, f"{len(got)} DQS edges for {edges} RE# edges"
        task.kill()
        await self.wait(self.t["tRHW"])
        return bytes(got[::2] if repeated else got)


def failed(status: int) -> bool:
    return bool(status >> OnfiStatus.FAIL & 1)


def ready(status: int) -> bool:
    return bool(status >> OnfiStatus.RDY & 1)


__all__ = ["OnfiHost", "NvDdr2Host", "NandTimeout", "failed", "ready"]
