"""A cycle-level ONFI asynchronous bus checker and responder for amaranth.sim.

``OnfiPinChecker`` looks at the PHY's pins once per clock (the values a
synchronous NAND model samples), records every latch and strobe, and checks
every ONFI timing of :mod:`rtl.nand.timing` in cycles.  It also plays a
minimal target: latched commands/addresses/data are logged, RE# cycles are
answered from a byte queue exactly tREA after the fall (garbage before), and
R/B# is pulled low for ``busy_cycles`` after a busy-starting command.  The
real NAND model (sim/nand_model) does all of this and more under Verilator;
this one exists so the PHY's waveforms are proven in pure Python seconds.
"""

from __future__ import annotations

from collections import deque

from atomflash.spec import OnfiCmd

BUSY_CMDS = {OnfiCmd.READ_2, OnfiCmd.PROGRAM_2, OnfiCmd.ERASE_2, OnfiCmd.RESET, OnfiCmd.COPYBACK_READ_2,
             OnfiCmd.READ_PARAM_PAGE}
GARBAGE = 0xEE


class OnfiPinChecker:
    def __init__(self, bus, timing: dict[str, int], targets: int, busy_cycles: int = 40, devices=None):
        self.bus = bus
        self.t = timing
        self.targets = targets
        self.busy_cycles = busy_cycles
        self.violations: list[str] = []
        self.latches: list[tuple[int, str, int]] = []   # (target, "cmd"/"addr"/"data", byte)
        self.read_bytes: deque[int] = deque()           # what the target answers
        self.io_delay = 0                                 # cycles between the target's DQ and the PHY's pin
        self.read_falls: list[int] = []
        self.busy_until = [0] * targets
        self.now = 0
        self.devices = devices   # optional per-target FakeTarget: answers reads, sets busy times

    def _viol(self, what):
        self.violations.append(f"cycle {self.now}: {what}")

    async def run(self, ctx):
        b = self.bus
        pins = (b.ce_n, b.cle, b.ale, b.we_n, b.re_n, b.dq_o, b.dq_oe)
        prev = None
        last_change = {}          # pin name -> cycle it took its current value
        we_fall = we_rise = re_fall = re_rise = -10**6
        last_we_rise_kind = None
        dq_line = deque(maxlen=self.io_delay + 1)         # DQ as the PHY sees it, io_delay cycles late
        last_addr_rise = -10**6
        busy_cmd_rise = -10**6
        ready_at = [0] * self.targets
        pending_data = None       # (cycle visible, byte)
        dq_value = GARBAGE
        async for _, _, ce_n, cle, ale, we_n, re_n, dq_o, dq_oe in ctx.tick().sample(*pins):
            self.now += 1
            now = self.now  # values seen here were set at edge now-1
            cur = dict(ce_n=ce_n, cle=cle, ale=ale, we_n=we_n, re_n=re_n, dq_o=dq_o, dq_oe=dq_oe)
            edge = now - 1
            if prev is not None:
                for k, v in cur.items():
                    if v != prev[k]:
                        # hold checks: nothing latched may change too soon after WE# rose
                        hold = {"cle": "tCLH", "ale": "tALH", "ce_n": "tCH"}.get(k)
                        if hold and edge - we_rise < self.t[hold]:
                            self._viol(f"{k} changed {edge - we_rise} after WE# rise < {hold}")
                        if k == "dq_o" and prev["dq_oe"] and edge - we_rise < self.t["tDH"]:
                            self._viol(f"DQ changed {edge - we_rise} after WE# rise < tDH")
                        last_change[k] = edge
                sel = [i for i in range(self.targets) if not (ce_n >> i) & 1]
                if len(sel) > 1:
                    self._viol("two chip enables low")
                if prev["we_n"] and not we_n:                       # WE# fall
                    if edge - we_fall < self.t["tWC"]:
                        self._viol(f"tWC {edge - we_fall}")
                    if edge - we_rise < self.t["tWH"]:
                        self._viol(f"tWH {edge - we_rise}")
                    if edge - re_rise < self.t["tRHW"]:
                        self._viol(f"tRHW {edge - re_rise}")
                    we_fall = edge
                if not prev["we_n"] and we_n:                       # WE# rise: latch
                    if edge - we_fall < self.t["tWP"]:
                        self._viol(f"tWP {edge - we_fall}")
                    for k, setup in (("cle", "tCLS"), ("ale", "tALS"), ("dq_o", "tDS"), ("ce_n", "tCS")):
                        if edge - last_change.get(k, -10**6) < self.t[setup]:
                            self._viol(f"{setup} {edge - last_change.get(k)}")
                    if not dq_oe:
                        self._viol("WE# rose with DQ not driven")
                    kind = "cmd" if cle else "addr" if ale else "data"
                    if cle and ale:
                        self._viol("CLE and ALE both high")
                    if kind == "data" and last_we_rise_kind == "addr" and edge - last_addr_rise < self.t["tADL"]:
                        self._viol(f"tADL {edge - last_addr_rise}")
                    target = sel[0] if sel else -1
                    if target >= 0 and now < self.busy_until[target]:
                        if not (kind == "cmd" and dq_o in (OnfiCmd.READ_STATUS, OnfiCmd.RESET)):
                            self._viol(f"latch to busy target {target}")
                    self.latches.append((target, kind, dq_o))
                    if self.devices and target >= 0:
                        busy = self.devices[target].latch(kind, dq_o)
                        if busy:
                            self.busy_until[target] = now + self.t["tWB"] + busy
                            ready_at[target] = self.busy_until[target]
                    if kind == "addr":
                        last_addr_rise = edge
                    if kind == "cmd" and dq_o in BUSY_CMDS and target >= 0 and not self.devices:
                        self.busy_until[target] = now + self.t["tWB"] + self.busy_cycles
                        busy_cmd_rise = edge
                        ready_at[target] = self.busy_until[target]
                    last_we_rise_kind = kind
                    we_rise = edge
                if prev["re_n"] and not re_n:                       # RE# fall
                    if edge - re_fall < self.t["tRC"]:
                        self._viol(f"tRC {edge - re_fall}")
                    if edge - re_rise < self.t["tREH"]:
                        self._viol(f"tREH {edge - re_rise}")
                    if edge - we_rise < self.t["tWHR"]:
                        self._viol(f"tWHR {edge - we_rise}")
                    target = sel[0] if sel else -1
                    if target >= 0 and now < self.busy_until[target]:
                        self._viol("RE# to a busy target")
                    if target >= 0 and edge - ready_at[target] < self.t["tRR"]:
                        self._viol(f"tRR {edge - ready_at[target]}")
                    if dq_oe:
                        self._viol("RE# fell while the master drives DQ")
                    re_fall = edge
                    self.read_falls.append(edge)
                    if self.devices and target >= 0:
                        byte = self.devices[target].read()
                    else:
                        byte = self.read_bytes.popleft() if self.read_bytes else GARBAGE
                    pending_data = (edge + self.t["tREA"], byte)
                    dq_value = GARBAGE
                if not prev["re_n"] and re_n:                       # RE# rise
                    if edge - re_fall < self.t["tRP"]:
                        self._viol(f"tRP {edge - re_fall}")
                    re_rise = edge
            prev = cur
            # R/B#
            rb = 0
            for i in range(self.targets):
                if now >= self.busy_until[i]:
                    rb |= 1 << i
            ctx.set(self.bus.rb_n, rb)
            # data becomes visible (for sampling at edge e) from edge e onwards
            if pending_data and pending_data[0] <= now + 1:
                dq_value = pending_data[1]
                pending_data = None
            dq_line.append(dq_value)
            ctx.set(self.bus.dq_i, dq_line[0])


class FakeTarget:
    """A functional ONFI target for the checker: pages, erase, status, ID.

    Just enough of a NAND for sequencer tests in pure Python; the Verilator
    suite runs against the real model.  ``fail_next`` makes the next program
    or erase report FAIL.
    """

    def __init__(self, page_bytes: int, pages_per_block: int, page_bits: int, busy: int = 30):
        self.page_bytes, self.ppb, self.page_bits, self.busy = page_bytes, pages_per_block, page_bits, busy
        self.pages: dict[int, bytearray] = {}
        self.reg = bytearray(b"\xff" * page_bytes)
        self.cmd = None
        self.addr: list[int] = []
        self.col = 0
        self.out: list[int] = []
        self.status = 0xE0
        self.fail_next = False
        self.mode = None
        self.features: list[int] = []
        self.log: list[str] = []

    def _num(self, cycles):
        return sum(b << (8 * i) for i, b in enumerate(cycles))

    def latch(self, kind, byte):
        if kind == "cmd":
            self.cmd = byte
            if byte in (0x00, 0x80, 0x60, 0x90, 0xEC, 0x05, 0x85, 0xEF):
                self.addr = []
                if byte == 0x80:
                    self.reg = bytearray(b"\xff" * self.page_bytes)
                if byte == 0xEF:
                    self.features = []
            if byte in (0x30, 0x35):
                row = self._num(self.addr[2:])
                self.reg = bytearray(self.pages.get(row, b"\xff" * self.page_bytes))
                self.col, self.mode = self._num(self.addr[:2]), "data"
                self.log.append(f"read {row}")
                return self.busy
            if byte == 0xE0:
                self.col, self.mode = self._num(self.addr[:2]), "data"
            if byte == 0x10:
                row = self.prog_row
                if self.fail_next:
                    self.status, self.fail_next = 0xE1, False
                else:
                    old = self.pages.get(row, bytearray(b"\xff" * self.page_bytes))
                    self.pages[row] = bytearray(a & b for a, b in zip(old, self.reg))
                    self.status = 0xE0
                self.log.append(f"program {row}")
                return self.busy
            if byte == 0xD0:
                blk = self._num(self.addr) >> self.page_bits
                if self.fail_next:
                    self.status, self.fail_next = 0xE1, False
                else:
                    for pg in range(self.ppb):
                        self.pages.pop((blk << self.page_bits) | pg, None)
                    self.status = 0xE0
                self.log.append(f"erase {blk}")
                return self.busy
            if byte == 0x70:
                self.mode = "status"
            if byte == 0xFF:
                self.status = 0xE0
                return self.busy
            return 0
        if kind == "addr":
            self.addr.append(byte)
            if self.cmd == 0x90:
                self.mode, self.out = "id", [0xAF, 0x5A, 0x00, 0x15, 0x00]
            if self.cmd == 0xEC and len(self.addr) == 1:
                self.reg = bytearray((i * 3) & 0xFF for i in range(self.page_bytes))
                self.col, self.mode = 0, "data"
                return self.busy
            if self.cmd in (0x80, 0x85) and len(self.addr) == 2:
                self.col = self._num(self.addr[:2])
            if self.cmd in (0x80, 0x85) and len(self.addr) == 5:
                self.prog_row = self._num(self.addr[2:])
            return 0
        if self.cmd == 0xEF:
            self.features.append(byte)
            return self.busy if len(self.features) == 4 else 0
        self.reg[self.col] = byte
        self.col += 1
        return 0

    def read(self):
        if self.mode == "status":
            return self.status
        if self.mode == "id":
            return self.out.pop(0) if self.out else 0
        b = self.reg[self.col] if self.col < self.page_bytes else 0
        self.col += 1
        return b
