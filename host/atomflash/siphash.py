"""SipHash-c-d (Aumasson & Bernstein, 2012), the reference: a keyed pseudo-random function of a byte
string under a 128-bit key.  The gateware's core is ``rtl.lib.siphash.SipHash``; the token check
(``spec.token_check``) and the TRNG's conditioner are defined by this function."""

__all__ = ["siphash"]

MASK = 2**64 - 1
INIT = (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573)


def _rotl(x, n):
    return ((x << n) | (x >> (64 - n))) & MASK


def siphash(key: bytes, message: bytes, c: int = 2, d: int = 4) -> int:
    """The reference: SipHash-c-d of ``message`` under the 16-byte ``key``, as a 64-bit integer."""
    if len(key) != 16:
        raise ValueError("a SipHash key is 16 bytes")
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ INIT[0], k1 ^ INIT[1], k0 ^ INIT[2], k1 ^ INIT[3]]

    def rounds(n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & MASK; v[2] = (v[2] + v[3]) & MASK            # noqa: E702
            v[1] = _rotl(v[1], 13) ^ v[0]; v[3] = _rotl(v[3], 16) ^ v[2]         # noqa: E702
            v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[1]) & MASK; v[0] = (v[0] + v[3]) & MASK            # noqa: E702
            v[1] = _rotl(v[1], 17) ^ v[2]; v[3] = _rotl(v[3], 21) ^ v[0]         # noqa: E702
            v[2] = _rotl(v[2], 32)

    tail = len(message) % 8
    blocks = [int.from_bytes(message[i:i + 8], "little") for i in range(0, len(message) - tail, 8)]
    blocks.append(int.from_bytes(message[len(message) - tail:], "little") | (len(message) & 0xFF) << 56)
    for m in blocks:
        v[3] ^= m
        rounds(c)
        v[0] ^= m
    v[2] ^= 0xFF
    rounds(d)
    return v[0] ^ v[1] ^ v[2] ^ v[3]
