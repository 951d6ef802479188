"""rtl.lib.siphash.SipHash in amaranth.sim: random keys and messages against the reference
(``siphash``, itself checked against the algorithm's published vectors), with idle cycles between
the message's words and backpressure on the digest, and the cycle count the docstring promises."""

import gc
import random
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from rtl.lib.siphash import SipHash, siphash

KEY = bytes(range(16))


def test_the_reference_gives_the_published_vectors():
    # the SipHash paper's appendix: key 00..0f, message 00..0e
    assert siphash(KEY, bytes(range(15))) == 0xA129CA6149BE45E5
    # the reference implementation's vectors, messages 00 01 02 ... of length 0 and 8
    assert siphash(KEY, b"") == 0x726FDB47DD0E0E31
    assert siphash(KEY, bytes(range(8))) == 0x93F5F5799A932462


class SipHashTB:
    """MACs through the core, one after another: each a random key and ``words`` random words, with
    ``idle`` (the chance of a cycle without a word) and ``backpressure`` (the chance the digest is not
    taken in a cycle).  ``results``: (expected, got, cycles from the first word's transfer to the
    digest's, both counted)."""

    def __init__(self, words, *, c=2, d=4, macs=30, idle=0.0, backpressure=0.0, seed=1):
        self.dut = SipHash(words=words, c=c, d=d)
        self.words, self.c, self.d = words, c, d
        self.idle, self.backpressure = idle, backpressure
        self.rng = random.Random(seed)
        self.jobs = []
        for _ in range(macs):
            key = self.rng.randbytes(16)
            msg = [self.rng.getrandbits(64) for _ in range(words)]
            self.jobs.append((key, msg, siphash(key, b"".join(w.to_bytes(8, "little") for w in msg), c, d)))
        self.results = []
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.bench)

    async def bench(self, ctx):
        dut, rng = self.dut, self.rng
        for key, msg, want in self.jobs:
            ctx.set(dut.key, int.from_bytes(key, "little"))
            cycles = None
            for w in msg:
                while rng.random() < self.idle:
                    await ctx.tick()
                    cycles = None if cycles is None else cycles + 1
                ctx.set(dut.message.valid, 1)
                ctx.set(dut.message.payload, w)
                while True:
                    ready = ctx.get(dut.message.ready)
                    await ctx.tick()
                    cycles = (cycles or 0) + 1
                    if ready:
                        break
                ctx.set(dut.message.valid, 0)
            while True:
                take = rng.random() >= self.backpressure
                ctx.set(dut.digest.ready, take)
                valid, got = ctx.get(dut.digest.valid), ctx.get(dut.digest.payload)
                await ctx.tick()
                cycles += 1
                if valid and take:
                    break
            ctx.set(dut.digest.ready, 0)
            self.results.append((want, got, cycles))

    def run(self):
        self.sim.run()
        return self.results


@pytest.mark.parametrize("words, c, d", [(2, 2, 4), (1, 2, 4), (3, 1, 3)])
def test_every_digest_is_the_references_and_takes_the_promised_cycles(words, c, d):
    results = SipHashTB(words, c=c, d=d).run()
    assert [got for _, got, _ in results] == [want for want, _, _ in results]
    # the docstring's count: (words + 1)(2c + 1) + 2d + 2, both handshakes counted
    assert {n for _, _, n in results} == {(words + 1) * (2 * c + 1) + 2 * d + 2}


def test_idle_words_and_a_slow_reader_change_no_digest():
    results = SipHashTB(2, idle=0.4, backpressure=0.5, macs=40, seed=7).run()
    assert [got for _, got, _ in results] == [want for want, _, _ in results]
    assert max(n for _, _, n in results) > 25          # the stalls did happen


def test_a_core_without_words_or_rounds_is_refused():
    with warnings.catch_warnings():
        # the refused object was made before its __init__ raised: amaranth warns when it is collected
        warnings.simplefilter("ignore", UnusedElaboratable)
        for kw in (dict(words=0), dict(words=1, c=0), dict(words=1, d=0)):
            with pytest.raises(ValueError):
                SipHash(**kw)
        gc.collect()
