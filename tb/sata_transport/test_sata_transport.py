"""The SATA transport layer (``rtl/sata/transport.py``) alone, between a stand-in link and a stand-in command layer.

``TransportTB`` drives both sides' streams: frames on ``rx`` (random gaps), the device's frames taken
from ``tx`` (random backpressure) and answered on ``tx_status`` (R_OK, or R_ERR where asked), Register
H2D FISes taken from ``command`` and FISes requested on ``send``.  The oracles are the ``spec`` records
and, independently, LiteSATA's own FIS header layouts (``litesata.common``), the host core this device
must talk to: every Register H2D the host builds is decoded to its fields, and every FIS the device
builds is read back field by field with LiteSATA's layout.
"""

import random

from amaranth import Module
from amaranth.sim import Simulator
from litesata import common as litesata

from atomflash import spec
from atomflash.spec import SataFisType
from rtl.sata.transport import SataTransport

LITESATA_HEADER = {SataFisType.REG_H2D: litesata.fis_reg_h2d_header,
                   SataFisType.REG_D2H: litesata.fis_reg_d2h_header,
                   SataFisType.DMA_ACTIVATE: litesata.fis_dma_activate_d2h_header,
                   SataFisType.PIO_SETUP: litesata.fis_pio_setup_d2h_header,
                   SataFisType.DATA: litesata.fis_data_header}


def litesata_fields(kind, words):
    """Every field of LiteSATA's header for ``kind``, read from the dwords."""
    header = LITESATA_HEADER[kind]
    raw = sum(w << 32 * i for i, w in enumerate(words))
    return {name: raw >> (8 * f.byte + f.offset) & ((1 << f.width) - 1) for name, f in header.fields.items()}


class TransportTB:
    def __init__(self, seed, *, r_err=0.0, gap=0.3, backpressure=0.3):
        self.rng = random.Random(seed)
        self.r_err, self.gap, self.backpressure = r_err, gap, backpressure
        self.t = SataTransport()
        m = Module()
        m.submodules.t = self.t
        self.m = m
        self.frames, self.commands, self.data_in, self.sent = [], [], [], []
        self.r_errs = 0
        self.refuse_data = False
        self.take_commands = True        # the command layer takes Register H2Ds (with random backpressure)

    async def link_tx(self, ctx):
        t, rng = self.t, self.rng
        words = []
        while True:
            ctx.set(t.tx.ready, int(rng.random() > self.backpressure))
            _, _, valid, ready, data, last = await ctx.tick().sample(
                t.tx.valid, t.tx.ready, t.tx.payload.data, t.tx.payload.last)
            if not (valid and ready):
                continue
            words.append(data)
            if not last:
                continue
            ctx.set(t.tx.ready, 0)
            ok = not (self.refuse_data if words[0] & 0xFF == SataFisType.DATA else rng.random() < self.r_err)
            self.frames.append((words, ok))
            self.r_errs += not ok
            words = []
            ctx.set(t.tx_status.payload.ok, int(ok))
            ctx.set(t.tx_status.valid, 1)
            while not (await ctx.tick().sample(t.tx_status.ready))[2]:
                pass
            ctx.set(t.tx_status.valid, 0)

    async def upper(self, ctx):
        """The command layer's side: takes commands, data and outcomes with random backpressure."""
        t, rng = self.t, self.rng
        async for _, _, cv, cr, cmd, dv, dr, d, sv, sr, ok in ctx.tick().sample(
                t.command.valid, t.command.ready, t.command.payload, t.data_in.valid, t.data_in.ready,
                t.data_in.payload, t.sent.valid, t.sent.ready, t.sent.payload.ok):
            if cv and cr:
                self.commands.append({k: int(getattr(cmd, k)) for k in ("c", "command", "features", "lba", "count",
                                                                        "device", "control")})
            if dv and dr:
                self.data_in.append((d.data, d.last, d.error))
            if sv and sr:
                self.sent.append(ok)
            for port in (t.command, t.data_in, t.sent):
                ctx.set(port.ready, int(rng.random() > 0.3))
            if not self.take_commands:
                ctx.set(t.command.ready, 0)

    async def send_fis(self, ctx, words, *, error=False, patience=10_000):
        """One frame on rx, with random gaps; fails if the device holds the link ``patience`` cycles."""
        rx = self.t.rx
        for i, w in enumerate(words):
            while self.rng.random() < self.gap:
                ctx.set(rx.valid, 0)
                await ctx.tick()
            last = i == len(words) - 1
            ctx.set(rx.payload, {"data": w, "last": int(last), "error": int(error and last)})
            ctx.set(rx.valid, 1)
            for _ in range(patience):
                if (await ctx.tick().sample(rx.ready))[2]:
                    break
            else:
                raise AssertionError("the device held the link")
        ctx.set(rx.valid, 0)

    async def request(self, ctx, payload, data=()):
        """One FIS to send, and a Data FIS's dwords; waits for its outcome."""
        t = self.t
        before = len(self.sent)
        ctx.set(t.send.payload, payload)
        ctx.set(t.send.valid, 1)
        while not (await ctx.tick().sample(t.send.ready))[2]:
            pass
        ctx.set(t.send.valid, 0)
        for i, w in enumerate(data):
            ctx.set(t.data_out.payload, {"data": w, "last": int(i == len(data) - 1)})
            ctx.set(t.data_out.valid, 1)
            while not (await ctx.tick().sample(t.data_out.ready))[2]:
                pass
        ctx.set(t.data_out.valid, 0)
        for _ in range(10_000):
            if len(self.sent) > before:
                return self.sent[-1]
            await ctx.tick()
        raise AssertionError("no outcome")

    def run(self, bench):
        sim = Simulator(self.m)
        sim.add_clock(1e-8)
        sim.add_process(self.link_tx)
        sim.add_process(self.upper)

        async def main(ctx):
            ctx.set(self.t.link_up, 1)
            await bench(ctx)
        sim.add_testbench(main)
        sim.run()


def h2d_words(**fields):
    raw = spec.SATA_FIS_REG_H2D.pack(type=SataFisType.REG_H2D, **fields)
    return [int.from_bytes(raw[i:i + 4], "little") for i in range(0, 20, 4)]


def test_register_h2d_decodes_as_litesata_lays_it_out():
    tb = TransportTB(1)
    rng = tb.rng
    sent = []

    async def bench(ctx):
        for _ in range(30):
            fields = {"flags": spec.SATA_FIS_REG_H2D.compose("flags", c=rng.randrange(2), pm_port=rng.randrange(16)),
                      "command": rng.randrange(256), "features": rng.randrange(256),
                      "features_exp": rng.randrange(256), "device": rng.randrange(256), "count": rng.randrange(1 << 16),
                      "control": rng.randrange(256), **{f"lba{i}": rng.randrange(256) for i in range(6)}}
            words = h2d_words(**fields)
            sent.append(litesata_fields(SataFisType.REG_H2D, words))
            await tb.send_fis(ctx, words)
        await ctx.tick().repeat(50)

    tb.run(bench)
    assert len(tb.commands) == len(sent)
    for got, want in zip(tb.commands, sent):
        assert got == {"c": want["c"], "command": want["command"], "device": want["device"],
                       "features": want["features_msb"] << 8 | want["features_lsb"],
                       "lba": want["lba_msb"] << 24 | want["lba_lsb"], "count": want["count"],
                       "control": want["control"]}


def test_each_fis_the_device_sends_reads_back_in_litesata_layout_and_non_data_ones_are_retried():
    tb = TransportTB(2, r_err=0.3)
    rng = tb.rng
    data = [rng.randrange(1 << 32) for _ in range(9)]

    async def bench(ctx):
        for _ in range(6):
            values = {"status": rng.randrange(256), "error": rng.randrange(256), "lba": rng.randrange(1 << 48),
                      "device": rng.randrange(256), "count": rng.randrange(1 << 16), "interrupt": 1,
                      "to_host": 1, "e_status": rng.randrange(256), "transfer_count": 512}
            for kind in (SataFisType.REG_D2H, SataFisType.DMA_ACTIVATE, SataFisType.PIO_SETUP):
                tb.frames.clear()
                ok = await tb.request(ctx, {"type": kind, **values})
                assert ok == tb.frames[-1][1] and all(not f[1] for f in tb.frames[:-1])
                assert ok or len(tb.frames) == 1 + tb.t.retries, "gave up before its retries"
                assert len(tb.frames) <= 1 + tb.t.retries and len({tuple(f[0]) for f in tb.frames}) == 1
                words = tb.frames[-1][0]
                assert len(words) == LITESATA_HEADER[kind].length
                got = litesata_fields(kind, words)
                assert got["type"] == kind and got.get("pm_port", 0) == 0
                if kind != SataFisType.DMA_ACTIVATE:
                    assert (got["status"], got["errors"], got["i"]) == (values["status"], values["error"], 1)
                    assert got["lba_msb"] << 24 | got["lba_lsb"] == values["lba"] and got["count"] == values["count"]
                if kind == SataFisType.PIO_SETUP:
                    assert got["d"] == 1 and got["transfer_count"] == 512
                    assert spec.SATA_FIS_PIO_SETUP.unpack(b"".join(w.to_bytes(4, "little") for w in words)).e_status \
                        == values["e_status"]
            sdb = {"type": SataFisType.SET_DEVICE_BITS, "status": 0x51, "error": 0x04, "sactive": 0x8000_0001,
                   "interrupt": 1}
            tb.frames.clear()
            await tb.request(ctx, sdb)
            raw = b"".join(w.to_bytes(4, "little") for w in tb.frames[-1][0])
            fis = spec.SATA_FIS_SET_DEVICE_BITS.unpack(raw)
            assert fis.type == SataFisType.SET_DEVICE_BITS and fis.status == 0x51 and fis.sactive == 0x8000_0001
        # a Data FIS: never sent again
        tb.frames.clear()
        tb.refuse_data = True
        assert await tb.request(ctx, {"type": SataFisType.DATA}, data) == 0 and len(tb.frames) == 1
        tb.refuse_data = False
        assert await tb.request(ctx, {"type": SataFisType.DATA}, data) == 1
        assert tb.frames[-1][0] == [int(SataFisType.DATA)] + data

    tb.run(bench)
    assert tb.r_errs > 3


def test_data_in_only_when_wanted_and_bad_frames_dropped():
    tb = TransportTB(3)
    payload = [tb.rng.randrange(1 << 32) for _ in range(5)]
    data_fis = [int(SataFisType.DATA)] + payload

    async def bench(ctx):
        t = tb.t
        await tb.send_fis(ctx, data_fis)                                   # nobody asked
        await tb.send_fis(ctx, h2d_words(command=0x25)[:3])                # short
        await tb.send_fis(ctx, h2d_words(command=0x25) + [7])              # long
        await tb.send_fis(ctx, [0x5A, 0, 0])                               # unknown
        await tb.send_fis(ctx, h2d_words(command=0x25), error=True)        # bad CRC
        await ctx.tick().repeat(20)
        assert (ctx.get(t.malformed), ctx.get(t.crc_errors)) == (4, 1)
        assert not tb.commands and not tb.data_in
        ctx.set(t.data_wanted, 1)
        await tb.send_fis(ctx, data_fis)
        await tb.send_fis(ctx, data_fis, error=True)                       # passed on, flagged, counted
        await tb.send_fis(ctx, [int(SataFisType.DATA)])                    # no data
        await ctx.tick().repeat(20)
        assert tb.data_in == [(w, i == 4, 0) for i, w in enumerate(payload)] + \
                            [(w, i == 4, i == 4) for i, w in enumerate(payload)]
        assert (ctx.get(t.malformed), ctx.get(t.crc_errors)) == (5, 2)

    tb.run(bench)


def test_a_data_fis_passes_a_waiting_command_and_a_second_command_waits():
    """With NCQ the host may queue a command just before the Data FIS of one in progress: the Data FIS
    must reach the command layer while the new command waits in its slot; only another Register H2D is
    held (HOLD at its first dword) until the slot is free, and then both commands come in order."""
    tb = TransportTB(4)
    payload = [tb.rng.randrange(1 << 32) for _ in range(7)]
    first = h2d_words(flags=spec.SATA_FIS_REG_H2D.compose("flags", c=1), command=0x61, count=3 << 3, features=1)
    second = h2d_words(flags=spec.SATA_FIS_REG_H2D.compose("flags", c=1), command=0x60, count=4 << 3, features=2)

    async def bench(ctx):
        t = tb.t
        ctx.set(t.data_wanted, 1)
        tb.take_commands = False
        await tb.send_fis(ctx, first)
        await tb.send_fis(ctx, [int(SataFisType.DATA)] + payload, patience=200)
        await ctx.tick().repeat(20)
        assert tb.data_in == [(w, i == 6, 0) for i, w in enumerate(payload)], "the Data FIS did not pass"
        assert not tb.commands and ctx.get(t.command.valid), "the first command is not waiting in its slot"
        ctx.set(t.rx.payload, {"data": second[0], "last": 0, "error": 0})
        ctx.set(t.rx.valid, 1)
        for _ in range(50):
            assert not (await ctx.tick().sample(t.rx.ready))[2], "a second Register H2D overwrote the slot"
        tb.take_commands = True
        await tb.send_fis(ctx, second)
        await ctx.tick().repeat(20)
        assert [c["command"] for c in tb.commands] == [0x61, 0x60]
        assert [c["count"] for c in tb.commands] == [3 << 3, 4 << 3] and [c["features"] for c in tb.commands] == [1, 2]
        assert (ctx.get(t.malformed), ctx.get(t.crc_errors)) == (0, 0)

    tb.run(bench)
