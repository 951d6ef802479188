"""atomflash.errors (one exception per status) and atomflash.scsi (the
append/remap paper's CDBs, byte-exact)."""

import pytest

from atomflash import errors, scsi
from atomflash.spec import REMAP_ENTRY, Opcode, Status


def test_one_exception_class_per_status():
    codes = [s for s in Status if s is not Status.SUCCESS]
    assert len(errors.BY_STATUS) == len(codes)
    assert len({c.__name__ for c in errors.BY_STATUS.values()}) == len(codes)
    for s in codes:
        cls = errors.error_class(s)
        assert issubclass(cls, errors.AtomflashError) and cls.status is s
        with pytest.raises(cls, match=s.name) as exc:
            errors.check(s, "detail")
        assert s.doc in str(exc.value) and f"0x{int(s):02x}" in str(exc.value)
    assert errors.UnknownTx.status is Status.UNKNOWN_TX and errors.InvalidToken.status is Status.INVALID_TOKEN
    errors.check(Status.SUCCESS)
    with pytest.raises(ValueError):
        errors.error_class(0xEE)
    with pytest.raises(ValueError):
        errors.error_class(Status.SUCCESS)


def test_append_atomic_cdb_bytes():
    cdb = scsi.encode_append_atomic(0x1234, fua=True, dpo=True)
    # 3Dh | DPO(4)+FUA(3) | 4 x 0 | allocation 8 | 12h 34h | control
    assert cdb == bytes([0x3D, 0x18, 0, 0, 0, 0, 8, 0x12, 0x34, 0])
    a = scsi.decode_append_atomic(cdb)
    assert (a.blocks, a.fua, a.dpo, a.fua_nv, a.allocation_length) == (0x1234, True, True, False, 8)
    assert scsi.to_command(cdb) == (Opcode.APPEND, {"nlb": 0x1234, "fua": True})
    assert scsi.encode_token(0x0102030405060708) == bytes(range(1, 9))
    assert scsi.decode_token(bytes(range(1, 9))) == 0x0102030405060708


@pytest.mark.parametrize("cdb,fragment", [
    (bytes([0x3D, 0x01, 0, 0, 0, 0, 8, 0, 1, 0]), "byte 1"),
    (bytes([0x3D, 0, 0, 1, 0, 0, 8, 0, 1, 0]), "bytes 2-5"),
    (bytes([0x3D, 0, 0, 0, 0, 0, 7, 0, 1, 0]), "byte 6"),
    (bytes([0x3D, 0, 0, 0, 0, 0, 8, 0, 0, 0]), "transfer length 0"),
    (bytes([0x3D, 0, 0, 0, 0, 0, 8, 0, 1]), "10 bytes"),
    (bytes([0x2A, 0, 0, 0, 0, 0, 8, 0, 1, 0]), "byte 0"),
])
def test_append_atomic_rejects(cdb, fragment):
    with pytest.raises(scsi.CdbError, match=fragment):
        scsi.to_command(cdb)


def test_remap_cdb_and_descriptors():
    triples = [(7, 0xA1B2C3D4E5F60718, 3), (1 << 40, 1, 1)]
    cdb, params = scsi.encode_remap(triples)
    assert cdb == bytes([0x49, 0, 0, 0, 0, 0, 0, 0, 40, 0])
    assert len(params) == 2 * scsi.REMAP_DESCRIPTOR_SIZE
    assert params[:20] == bytes([0, 0, 0, 0, 0, 0, 0, 7, 0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6, 0x07, 0x18, 0, 0, 0, 3])
    op, fields = scsi.to_command(cdb, params)
    assert op is Opcode.REMAP
    assert fields["entries"] == [{"lba": lba, "token": tok, "nlb": n} for lba, tok, n in triples]
    # the entries pack into the device's REMAP_ENTRY list unchanged (the token is 8 bytes both ways)
    for e in fields["entries"]:
        assert REMAP_ENTRY.unpack(REMAP_ENTRY.pack(e)).token == e["token"]


@pytest.mark.parametrize("mutate,fragment", [
    (lambda c, p: (c[:1] + b"\x01" + c[2:], p), "bytes 1-6"),
    (lambda c, p: (c, p[:-1]), "parameter list is"),
    (lambda c, p: (c[:7] + bytes([0, 19]) + c[9:], p[:19]), "multiple of 20"),
    (lambda c, p: (c, p[:16] + b"\0\0\0\0" + p[20:]), "length 0 blocks"),
])
def test_remap_rejects(mutate, fragment):
    cdb, params = scsi.encode_remap([(7, 9, 3), (8, 10, 1)])
    cdb, params = mutate(cdb, params)
    with pytest.raises(scsi.CdbError, match=fragment):
        scsi.decode_remap(cdb, params)
