"""SipHash-c-d (Aumasson & Bernstein, 2012): a keyed MAC of a fixed number of 64-bit words.

SipHash is a pseudo-random function keyed by 128 bits: without the key, an
output for a message nobody has shown you is as hard to produce as a guess
(2^-64, or 2^-k for an output truncated to k bits), whatever else you know.
That is what a token needs when the host that must not forge it knows the
token's format and sees its own tokens.

The state is four 64-bit words; each *SipRound* is two half-rounds of
add-rotate-xor:

    A:  v0 += v1; v2 += v3; v1 = rotl(v1, 13) ^ v0; v3 = rotl(v3, 16) ^ v2; v0 = rotl(v0, 32)
    B:  v2 += v1; v0 += v3; v1 = rotl(v1, 17) ^ v2; v3 = rotl(v3, 21) ^ v0; v2 = rotl(v2, 32)

This core runs one half-round a cycle, so the longest path is one 64-bit
carry chain and an xor (a whole round a cycle would chain two, too long for
ECP5 at the SoC's clock).  A message of ``words`` 64-bit words (little-endian
bytes, as the reference reads them) takes ``(words + 1)(2 c + 1) + 2 d + 2``
cycles from its first word's transfer to the digest's, both counted: 25 for
SipHash-2-4 over two words, nothing beside a page program.

The message length is a multiple of 8 bytes, so the last block the algorithm
absorbs is only the length byte (``(8 words) << 56``).
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash.siphash import INIT, siphash  # the reference (the token check uses it too)

__all__ = ["SipHash", "siphash", "cycles"]


def cycles(words: int, c: int = 2, d: int = 4) -> int:
    """Cycles :class:`SipHash` takes for ``words`` 64-bit words, first transfer to digest, both counted."""
    return (words + 1) * (2 * c + 1) + 2 * d + 2


class SipHash(wiring.Component):
    """SipHash-c-d of ``words`` 64-bit words under ``key``.

    Parameters
    ----------
    words : int
        Message words per MAC (the message is ``8 * words`` bytes).
    c, d : int
        Compression and finalization rounds (2 and 4: SipHash-2-4).

    Ports
    -----
    key : In(128)
        ``key[:64]`` is the key's first 8 bytes as a little-endian word; held while a MAC runs.
    message : In(stream.Signature(64))
        The message's words in order, ``words`` transfers per MAC.  Taken one at a time, each
        after the previous word's rounds.
    digest : Out(stream.Signature(64))
        One transfer per MAC.  The next MAC's first word is taken once it has gone.
    """

    def __init__(self, *, words: int, c: int = 2, d: int = 4):
        if words < 1 or c < 1 or d < 1:
            raise ValueError("SipHash needs a word, and at least one round of each kind")
        self.words, self.c, self.d = words, c, d
        super().__init__({
            "key": In(128),
            "message": In(stream.Signature(64)),
            "digest": Out(stream.Signature(64)),
        })

    def elaborate(self, platform):
        m = Module()
        v = [Signal(64, name=f"v{i}") for i in range(4)]
        k0, k1 = self.key[:64], self.key[64:]
        word = Signal(range(self.words + 2))    # blocks taken: the message words, then the length block
        block = Signal(64)                      # the block being absorbed
        half = Signal(range(2 * max(self.c, self.d)))

        def rotl(x, n):
            return Cat(x[64 - n:], x[:64 - n])

        def half_round(first_half):
            if first_half:
                a0, a2 = v[0] + v[1], v[2] + v[3]
                s0, s2 = Signal(64), Signal(64)
                m.d.comb += [s0.eq(a0[:64]), s2.eq(a2[:64])]
                return [rotl(s0, 32), rotl(v[1], 13) ^ s0, s2, rotl(v[3], 16) ^ s2]
            a2, a0 = v[2] + v[1], v[0] + v[3]
            s0, s2 = Signal(64), Signal(64)
            m.d.comb += [s0.eq(a0[:64]), s2.eq(a2[:64])]
            return [s0, rotl(v[1], 17) ^ s2, rotl(s2, 32), rotl(v[3], 21) ^ s0]

        step_a, step_b = half_round(True), half_round(False)

        def rounds(state, n, then):
            """``state``: ``n`` SipRounds, a half-round a cycle, then ``then``."""
            with m.State(state):
                with m.If(half[0]):
                    m.d.sync += [v[i].eq(step_b[i]) for i in range(4)]
                with m.Else():
                    m.d.sync += [v[i].eq(step_a[i]) for i in range(4)]
                m.d.sync += half.eq(half + 1)
                with m.If(half == 2 * n - 1):
                    m.next = then

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.message.ready.eq(1)
                with m.If(self.message.valid):
                    init = [k0 ^ INIT[0], k1 ^ INIT[1], k0 ^ INIT[2], k1 ^ INIT[3]]
                    m.d.sync += [v[0].eq(init[0]), v[1].eq(init[1]), v[2].eq(init[2]),
                                 v[3].eq(init[3] ^ self.message.payload), block.eq(self.message.payload),
                                 word.eq(1), half.eq(0)]
                    m.next = "COMPRESS"
            rounds("COMPRESS", self.c, "ABSORBED")
            with m.State("ABSORBED"):
                # v0 ^= the block just compressed; then the next word, the length block, or finalization
                with m.If(word == self.words + 1):
                    m.d.sync += [v[0].eq(v[0] ^ block), v[2].eq(v[2] ^ 0xFF), half.eq(0)]
                    m.next = "FINALIZE"
                with m.Elif(word == self.words):
                    length = (8 * self.words & 0xFF) << 56
                    m.d.sync += [v[0].eq(v[0] ^ block), v[3].eq(v[3] ^ length), block.eq(length),
                                 word.eq(word + 1), half.eq(0)]
                    m.next = "COMPRESS"
                with m.Else():
                    m.d.comb += self.message.ready.eq(1)
                    with m.If(self.message.valid):
                        m.d.sync += [v[0].eq(v[0] ^ block), v[3].eq(v[3] ^ self.message.payload),
                                     block.eq(self.message.payload), word.eq(word + 1), half.eq(0)]
                        m.next = "COMPRESS"
            rounds("FINALIZE", self.d, "DIGEST")
            with m.State("DIGEST"):
                m.d.comb += [self.digest.valid.eq(1), self.digest.payload.eq(v[0] ^ v[1] ^ v[2] ^ v[3])]
                with m.If(self.digest.ready):
                    m.next = "IDLE"
        return m
