"""The append/remap paper's SCSI commands, encoded and decoded exactly
(``../shared/papers/append-atomic-and-remap.txt``, section 4.3), and mapped
onto atomflash's own APPEND and REMAP commands.

* **APPEND ATOMIC (3Dh)**, a 10-byte CDB: byte 1 holds DPO (bit 4), FUA
  (bit 3) and FUA_NV (bit 1); bytes 2-5 must be zero; byte 6 is the
  allocation length of the data-in buffer (the 8-byte ROD token comes back
  there); bytes 7-8 the transfer length in blocks (big-endian); byte 9 the
  control byte.
* **REMAP (49h)**, a 10-byte CDB: bytes 1-6 must be zero; bytes 7-8 the
  parameter list length in bytes; byte 9 control.  The parameter list is a
  concatenation of 20-byte descriptors: LBA (8 bytes), ROD token (8 bytes),
  length in blocks (4 bytes), all big-endian.

The ROD token is atomflash's 8-byte remap token (``spec.TOKEN``) carried as
an opaque big-endian 64-bit number, so the mapping is exact both ways.
Malformed input raises :class:`CdbError` naming the byte at fault.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import InvalidArgument
from .spec import LIMITS, Opcode

__all__ = ["APPEND_ATOMIC", "REMAP", "CDB_SIZE", "REMAP_DESCRIPTOR_SIZE", "CdbError", "AppendAtomic",
           "RemapTriple", "encode_append_atomic", "decode_append_atomic", "encode_token", "decode_token",
           "encode_remap", "decode_remap", "to_command"]

APPEND_ATOMIC = 0x3D
REMAP = 0x49
CDB_SIZE = 10
REMAP_DESCRIPTOR_SIZE = 20
TOKEN_SIZE = LIMITS.TOKEN_BYTES
_DPO, _FUA, _FUA_NV = 1 << 4, 1 << 3, 1 << 1


class CdbError(InvalidArgument):
    """A CDB or REMAP parameter list that the paper's format does not allow."""


@dataclass(frozen=True)
class AppendAtomic:
    blocks: int
    allocation_length: int = TOKEN_SIZE
    dpo: bool = False
    fua: bool = False
    fua_nv: bool = False
    control: int = 0


@dataclass(frozen=True)
class RemapTriple:
    lba: int
    token: int
    blocks: int


def encode_append_atomic(blocks: int, *, allocation_length: int = TOKEN_SIZE, dpo=False, fua=False, fua_nv=False,
                         control: int = 0) -> bytes:
    if not 1 <= blocks <= 0xFFFF:
        raise CdbError(f"transfer length {blocks} blocks does not fit bytes 7-8 (1..65535)")
    if not TOKEN_SIZE <= allocation_length <= 0xFF:
        raise CdbError(f"allocation length {allocation_length} cannot hold the {TOKEN_SIZE}-byte ROD token")
    flags = (_DPO if dpo else 0) | (_FUA if fua else 0) | (_FUA_NV if fua_nv else 0)
    return struct.pack(">BB4xBHB", APPEND_ATOMIC, flags, allocation_length, blocks, control & 0xFF)


def decode_append_atomic(cdb: bytes) -> AppendAtomic:
    cdb = bytes(cdb)
    if len(cdb) != CDB_SIZE:
        raise CdbError(f"APPEND ATOMIC CDB is {CDB_SIZE} bytes, got {len(cdb)}")
    op, flags, alloc, blocks, control = struct.unpack(">BB4xBHB", cdb)
    if op != APPEND_ATOMIC:
        raise CdbError(f"byte 0: operation code {op:02X}h is not APPEND ATOMIC ({APPEND_ATOMIC:02X}h)")
    if flags & ~(_DPO | _FUA | _FUA_NV):
        raise CdbError(f"byte 1: reserved bits set ({flags:02X}h)")
    if any(cdb[2:6]):
        raise CdbError("bytes 2-5: reserved, must be zero")
    if alloc < TOKEN_SIZE:
        raise CdbError(f"byte 6: allocation length {alloc} cannot hold the {TOKEN_SIZE}-byte ROD token")
    if blocks == 0:
        raise CdbError("bytes 7-8: transfer length 0")
    return AppendAtomic(blocks, alloc, bool(flags & _DPO), bool(flags & _FUA), bool(flags & _FUA_NV), control)


def encode_token(token: int) -> bytes:
    """The data-in structure APPEND ATOMIC returns: the ROD token, MSB first."""
    return token.to_bytes(TOKEN_SIZE, "big")


def decode_token(data: bytes) -> int:
    if len(data) < TOKEN_SIZE:
        raise CdbError(f"a ROD token is {TOKEN_SIZE} bytes, got {len(data)}")
    return int.from_bytes(data[:TOKEN_SIZE], "big")


def encode_remap(triples, *, control: int = 0) -> tuple[bytes, bytes]:
    """``(cdb, parameter_list)`` for a list of (lba, token, blocks)."""
    triples = [RemapTriple(*t) if not isinstance(t, RemapTriple) else t for t in triples]
    if not triples:
        raise CdbError("a REMAP needs at least one descriptor")
    params = b""
    for t in triples:
        if not (0 <= t.lba < 1 << 64 and 0 <= t.token < 1 << 64 and 1 <= t.blocks < 1 << 32):
            raise CdbError(f"descriptor {t} does not fit 8/8/4 bytes (blocks >= 1)")
        params += struct.pack(">QQI", t.lba, t.token, t.blocks)
    if len(params) > 0xFFFF:
        raise CdbError(f"parameter list of {len(params)} bytes does not fit bytes 7-8")
    return struct.pack(">B6xHB", REMAP, len(params), control & 0xFF), params


def decode_remap(cdb: bytes, params: bytes) -> list[RemapTriple]:
    cdb = bytes(cdb)
    if len(cdb) != CDB_SIZE:
        raise CdbError(f"REMAP CDB is {CDB_SIZE} bytes, got {len(cdb)}")
    op, length, _control = struct.unpack(">B6xHB", cdb)
    if op != REMAP:
        raise CdbError(f"byte 0: operation code {op:02X}h is not REMAP ({REMAP:02X}h)")
    if any(cdb[1:7]):
        raise CdbError("bytes 1-6: reserved, must be zero")
    if length == 0 or length % REMAP_DESCRIPTOR_SIZE:
        raise CdbError(f"bytes 7-8: parameter list length {length} is not a positive multiple of "
                       f"{REMAP_DESCRIPTOR_SIZE}")
    if len(params) != length:
        raise CdbError(f"parameter list is {len(params)} bytes, the CDB says {length}")
    triples = [RemapTriple(*struct.unpack_from(">QQI", params, off)) for off in range(0, length, REMAP_DESCRIPTOR_SIZE)]
    for i, t in enumerate(triples):
        if t.blocks == 0:
            raise CdbError(f"descriptor {i}: length 0 blocks")
    return triples


def to_command(cdb: bytes, params: bytes = b"") -> tuple[Opcode, dict]:
    """Map a CDB (and REMAP's parameter list) onto atomflash's command:
    ``(Opcode.APPEND, {"nlb", "fua"})`` or ``(Opcode.REMAP, {"entries": [{lba, token, nlb}]})``."""
    if not cdb:
        raise CdbError("empty CDB")
    if cdb[0] == APPEND_ATOMIC:
        a = decode_append_atomic(cdb)
        return Opcode.APPEND, {"nlb": a.blocks, "fua": a.fua}
    if cdb[0] == REMAP:
        return Opcode.REMAP, {"entries": [{"lba": t.lba, "token": t.token, "nlb": t.blocks}
                                          for t in decode_remap(cdb, params)]}
    raise CdbError(f"byte 0: operation code {cdb[0]:02X}h is neither APPEND ATOMIC (3Dh) nor REMAP (49h)")
