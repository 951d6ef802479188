"""cocotb tests: LiteSATA's host (PHY controller, datapath, link) against the
device stack (rtl/sata), back to back through the cable model (cable.py).

``SataTB`` owns the clock and resets and runs one loop per clock that
services all four frame streams at once (host link sink/source, device
tx/rx) plus the two frame results (the host's R_OK/R_ERR tap, the device's
``tx_status``): senders leave seeded gaps inside frames (HOLD from the
sender), receivers hold ``ready`` low in seeded stretches (HOLD from the
receiver once its buffer fills: the device's FIFO quickly, LiteSATA's only
past 128 dwords, so the stretches are long).  What comes out is compared
word for word with what went in, in order.
"""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

PERIOD_NS = 10


def random_frames(rnd, count, longest):
    """FISes of 1..longest dwords, most of them short, some long (past LiteSATA's HOLD level)."""
    frames = []
    for _ in range(count):
        n = rnd.choice((rnd.randint(1, 8), rnd.randint(1, longest), rnd.randint(1, longest)))
        frames.append([rnd.getrandbits(32) for _ in range(n)])
    return frames


class _Sender:
    def __init__(self, rnd, frames, gap):
        self.rnd, self.frames, self.gap = rnd, list(frames), gap
        self.frame, self.pos = 0, 0
        self.valid = 0

    def done(self):
        return self.frame >= len(self.frames)

    def offer(self):
        """(valid, data, last) for this cycle."""
        if self.done() or (self.gap and self.rnd.random() < self.gap):
            self.valid = 0
            return 0, 0, 0
        self.valid = 1
        f = self.frames[self.frame]
        return 1, f[self.pos], int(self.pos == len(f) - 1)

    def took(self):
        self.pos += 1
        if self.pos == len(self.frames[self.frame]):
            self.frame, self.pos = self.frame + 1, 0


class _Receiver:
    def __init__(self, rnd, stall, stall_len):
        self.rnd, self.stall, self.stall_len = rnd, stall, stall_len
        self.frames, self.errors, self.cur = [], [], []
        self.wait = 0
        self.done_at = []

    def ready(self):
        if self.wait:
            self.wait -= 1
            return 0
        if self.stall and self.rnd.random() < self.stall:
            self.wait = self.rnd.randint(1, self.stall_len)
            return 0
        return 1

    def took(self, data, last, error, cycle):
        self.cur.append(data)
        if last:
            self.frames.append(self.cur)
            self.errors.append(error)
            self.done_at.append(cycle)
            self.cur = []


class SataTB:
    def __init__(self, dut, seed):
        self.dut = dut
        self.rnd = random.Random(seed)
        self.cycle = 0

    async def start(self):
        d = self.dut
        cocotb.start_soon(Clock(d.clk, PERIOD_NS, units="ns").start())
        for name in ("rst", "cut", "host_rst", "host_sink_valid", "host_sink_data", "host_sink_last",
                     "host_source_ready", "dev_tx_valid", "dev_tx_data", "dev_tx_last", "dev_status_ready",
                     "dev_rx_ready", "insert_rate", "remove_rate", "flip_down", "flip_up", "flip_bit"):
            getattr(d, name).value = 0
        d.rst.value = 1
        await ClockCycles(d.clk, 5)
        d.rst.value = 0

    def up(self):
        return bool(self.dut.dev_link_up.value) and bool(self.dut.host_phy_ready.value)

    async def wait_link(self, up=True, limit=20000):
        for _ in range(limit):
            await RisingEdge(self.dut.clk)
            self.cycle += 1
            if self.up() == up:
                return self.cycle
        raise AssertionError(f"link not {'up' if up else 'down'} after {limit} cycles")

    async def exchange(self, host_frames, dev_frames, *, gap=0.1, stall=0.02, stall_len=300, limit=50000,
                       flip_down_frame=None, flip_up_frame=None):
        """Host sends ``host_frames``, the device ``dev_frames``, at once; returns what each side got."""
        d, rnd = self.dut, self.rnd
        hs, ds = _Sender(rnd, host_frames, gap), _Sender(rnd, dev_frames, gap)
        hr, dr = _Receiver(rnd, stall, stall_len), _Receiver(rnd, stall, stall_len)
        host_results, dev_results = [], []
        armed_down = armed_up = False
        for _ in range(limit):
            # a flip is armed once, when the frame before the chosen one has its result: the next data
            # dword in a frame on that lane is then the chosen frame's
            arm_down = flip_down_frame is not None and not armed_down and len(host_results) == flip_down_frame
            arm_up = flip_up_frame is not None and not armed_up and len(dev_results) == flip_up_frame
            d.flip_down.value, d.flip_up.value = int(arm_down), int(arm_up)
            armed_down, armed_up = armed_down or arm_down, armed_up or arm_up
            hv, hd, hl = hs.offer()
            d.host_sink_valid.value, d.host_sink_data.value, d.host_sink_last.value = hv, hd, hl
            dv, dd, dl = ds.offer()
            d.dev_tx_valid.value, d.dev_tx_data.value, d.dev_tx_last.value = dv, dd, dl
            h_ready, d_ready = hr.ready(), dr.ready()
            d.host_source_ready.value, d.dev_rx_ready.value = h_ready, d_ready
            d.dev_status_ready.value = 1
            await ReadOnly()
            if hv and d.host_sink_ready.value:
                hs.took()
            if dv and d.dev_tx_ready.value:
                ds.took()
            if h_ready and d.host_source_valid.value:
                hr.took(int(d.host_source_data.value), int(d.host_source_last.value),
                        int(d.host_source_error.value), self.cycle)
            if d_ready and d.dev_rx_valid.value:
                dr.took(int(d.dev_rx_data.value), int(d.dev_rx_last.value), int(d.dev_rx_error.value), self.cycle)
            if d.host_tx_result_valid.value:
                host_results.append(int(d.host_tx_result_ok.value))
            if d.dev_status_valid.value:
                dev_results.append(int(d.dev_status_ok.value))
            await RisingEdge(d.clk)
            self.cycle += 1
            if (len(host_results) == len(host_frames) and len(dev_results) == len(dev_frames)
                    and len(dr.frames) == len(host_frames) and len(hr.frames) == len(dev_frames)):
                break
        else:
            raise AssertionError(f"exchange unfinished after {limit} cycles: host sent {hs.frame}/{len(host_frames)} "
                                 f"results {len(host_results)}, device sent {ds.frame}/{len(dev_frames)} results "
                                 f"{len(dev_results)}; device got {len(dr.frames)}, host got {len(hr.frames)}")
        for name in ("host_sink_valid", "dev_tx_valid", "flip_down", "flip_up"):
            getattr(d, name).value = 0
        return dict(host_results=host_results, dev_results=dev_results, dev_got=dr, host_got=hr)


def check_clean(result, host_frames, dev_frames):
    assert result["dev_got"].frames == host_frames, "device received other dwords than the host sent"
    assert result["host_got"].frames == dev_frames, "host received other dwords than the device sent"
    assert result["dev_got"].errors == [0] * len(host_frames)
    assert result["host_got"].errors == [0] * len(dev_frames)
    assert result["host_results"] == [1] * len(host_frames), result["host_results"]
    assert result["dev_results"] == [1] * len(dev_frames), result["dev_results"]


@cocotb.test()
async def link_up_and_again_after_a_cut_line_and_a_new_comreset(dut):
    tb = SataTB(dut, 1)
    await tb.start()
    await tb.wait_link(True)
    frames = [[0x1234_5678, 0x9ABC_DEF0]]
    check_clean(await tb.exchange(frames, frames), frames, frames)
    # the line goes quiet: both sides drop the link, then OOB brings it back
    dut.cut.value = 1
    await tb.wait_link(False)
    for _ in range(200):
        await RisingEdge(dut.clk)
        assert not dut.dev_link_up.value, "device kept the link up on a dead line"
    dut.cut.value = 0
    await tb.wait_link(True)
    check_clean(await tb.exchange(frames, frames), frames, frames)
    # the host restarts: a new COMRESET while the device is up
    dut.host_rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.host_rst.value = 0
    await tb.wait_link(False)
    await tb.wait_link(True)
    check_clean(await tb.exchange(frames, frames), frames, frames)


@cocotb.test()
async def random_frames_both_ways_with_holds(dut):
    tb = SataTB(dut, 2)
    await tb.start()
    await tb.wait_link(True)
    host_frames, dev_frames = random_frames(tb.rnd, 10, 400), random_frames(tb.rnd, 10, 400)
    conts = int(dut.conts_up.value)
    result = await tb.exchange(host_frames, dev_frames, gap=0.05, stall=0.01, stall_len=400)
    check_clean(result, host_frames, dev_frames)
    assert int(dut.conts_up.value) - conts > 20   # the device's repeated primitives went out as CONT runs


@cocotb.test()
async def a_flipped_bit_is_answered_r_err(dut):
    tb = SataTB(dut, 3)
    await tb.start()
    await tb.wait_link(True)
    dut.flip_bit.value = 7
    host_frames, dev_frames = random_frames(tb.rnd, 4, 60), random_frames(tb.rnd, 4, 60)
    flipped_down, flipped_up = int(dut.flipped_down.value), int(dut.flipped_up.value)
    result = await tb.exchange(host_frames, dev_frames, flip_down_frame=1, flip_up_frame=2)
    assert int(dut.flipped_down.value) == flipped_down + 1 and int(dut.flipped_up.value) == flipped_up + 1
    # host -> device frame 1: the device flags it and answers R_ERR; the others pass
    assert result["host_results"] == [1, 0, 1, 1], result["host_results"]
    assert result["dev_got"].errors == [0, 1, 0, 0], result["dev_got"].errors
    # device -> host frame 2: LiteSATA flags it, the device's status says R_ERR
    assert result["dev_results"] == [1, 1, 0, 1], result["dev_results"]
    assert result["host_got"].errors == [0, 0, 1, 0], result["host_got"].errors
    for got, sent, bad in ((result["dev_got"].frames, host_frames, 1), (result["host_got"].frames, dev_frames, 2)):
        assert [f for i, f in enumerate(got) if i != bad] == [f for i, f in enumerate(sent) if i != bad]
        assert len(got[bad]) == len(sent[bad])
        diff = [a ^ b for a, b in zip(got[bad], sent[bad]) if a != b]
        assert diff == [1 << 7], [hex(x) for x in diff]


@cocotb.test()
async def both_sides_send_x_rdy_the_host_backs_off(dut):
    tb = SataTB(dut, 4)
    await tb.start()
    await tb.wait_link(True)
    await ClockCycles(dut.clk, 50)
    for rounds in range(3):
        host_frames, dev_frames = [[0xAAAA_0000 + rounds] * 20], [[0xDDDD_0000 + rounds] * 20]
        result = await tb.exchange(host_frames, dev_frames, gap=0.0, stall=0.0)
        check_clean(result, host_frames, dev_frames)
        # the device's frame went first: the host deferred to it
        assert result["host_got"].done_at[0] < result["dev_got"].done_at[0]


@cocotb.test()
async def aligns_inserted_and_removed_by_the_cable(dut):
    tb = SataTB(dut, 5)
    await tb.start()
    await tb.wait_link(True)
    dut.insert_rate.value, dut.remove_rate.value = 160, 160
    inserted, removed = int(dut.inserted.value), int(dut.removed.value)
    host_frames, dev_frames = random_frames(tb.rnd, 8, 300), random_frames(tb.rnd, 8, 300)
    result = await tb.exchange(host_frames, dev_frames, gap=0.05, stall=0.01, stall_len=300)
    check_clean(result, host_frames, dev_frames)
    assert int(dut.inserted.value) - inserted > 5 and int(dut.removed.value) - removed > 5
    assert tb.up()
    dut.insert_rate.value, dut.remove_rate.value = 0, 0


async def _send_and_cut(tb, stream, frame, cut_after, *, watch_rx=False):
    """Offer ``frame`` on ``stream`` ("dev_tx" or "host_sink") with the line cut ``cut_after`` dwords
    in; returns (device tx_status values seen, device rx dwords with their last/error) once the
    sender has taken the whole frame and, for the device, its status came."""
    d = tb.dut
    valid, ready, data, last = (getattr(d, f"{stream}_{p}") for p in ("valid", "ready", "data", "last"))
    statuses, received = [], []
    pos = 0
    for _ in range(50000):
        if pos < len(frame):
            valid.value, data.value, last.value = 1, frame[pos], int(pos == len(frame) - 1)
        else:
            valid.value = 0
        d.cut.value = int(pos >= cut_after)
        d.dev_status_ready.value = 1
        d.dev_rx_ready.value = 1
        await ReadOnly()
        if pos < len(frame) and ready.value:
            pos += 1
        if d.dev_status_valid.value:
            statuses.append(int(d.dev_status_ok.value))
        if d.dev_rx_valid.value:
            received.append((int(d.dev_rx_data.value), int(d.dev_rx_last.value), int(d.dev_rx_error.value)))
        await RisingEdge(d.clk)
        if pos == len(frame) and (statuses or (watch_rx and received and received[-1][1])):
            break
    else:
        raise AssertionError(f"{stream}: {pos} of {len(frame)} dwords taken, statuses {statuses}")
    valid.value = 0
    return statuses, received


async def _restart(tb):
    """Line back, host reset (LiteSATA's link keeps a half-received frame's state across its PHY's
    reset), link up again."""
    d = tb.dut
    d.cut.value = 0
    d.host_rst.value = 1
    await ClockCycles(d.clk, 3)
    d.host_rst.value = 0
    await tb.wait_link(True)


@cocotb.test()
async def link_down_mid_frame_ends_the_frame_as_failed(dut):
    tb = SataTB(dut, 6)
    await tb.start()
    await tb.wait_link(True)
    frame = [tb.rnd.getrandbits(32) for _ in range(600)]
    # device -> host, the host holding it off: the device takes the rest of the FIS, status 0
    dut.host_source_ready.value = 0
    statuses, _ = await _send_and_cut(tb, "dev_tx", frame, 300)
    assert statuses == [0], statuses
    assert not dut.dev_link_up.value
    await _restart(tb)
    # host -> device: what the device passed up ends with a dword flagged last and error
    _, received = await _send_and_cut(tb, "host_sink", frame, 200, watch_rx=True)
    assert received and received[-1][1:] == (1, 1), received[-3:]
    assert [w for w, _, _ in received[:-1]] == frame[:len(received) - 1]
    assert all(not last for _, last, _ in received[:-1])
    await _restart(tb)
    frames = [[1, 2, 3]]
    dut.host_source_ready.value = 1
    check_clean(await tb.exchange(frames, frames), frames, frames)
