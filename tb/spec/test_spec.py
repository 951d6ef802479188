"""The single source of truth: Python packing, the generated C header and the
Amaranth layouts must agree byte for byte."""

import random
import subprocess
import zlib

import pytest
from amaranth.lib import data

from atomflash import gen_c, spec
from atomflash.specdsl import Bits, Record, SpecError, u8, u16, u64
from rtl import spec as layouts
from sim.harness import runner

RNG_SEED = 20261122


def random_values(rec: Record, rng: random.Random) -> dict:
    return {f.name: rng.getrandbits(f.width) for f in rec.fields}


@pytest.mark.parametrize("rec", spec.RECORDS, ids=lambda r: r.name)
def test_pack_unpack_round_trip(rec):
    rng = random.Random(RNG_SEED)
    for _ in range(200):
        values = random_values(rec, rng)
        raw = rec.pack(values)
        assert len(raw) == rec.size
        assert rec.unpack(raw) == values
        assert rec.pack(rec.unpack(raw)) == raw


def test_pack_rejects_bad_input():
    with pytest.raises(SpecError, match="does not fit"):
        spec.CMD.pack(opcode=256)
    with pytest.raises(SpecError, match="does not fit"):
        spec.CMD.pack(cid=-1)
    with pytest.raises(SpecError, match="no field"):
        spec.CMD.pack(opcod=1)
    with pytest.raises(SpecError, match="64 bytes"):
        spec.CMD.unpack(b"\0" * 63)
    with pytest.raises(SpecError, match="does not fit"):
        spec.CPL.compose("sf", status=1 << 15)


def test_record_definition_errors():
    with pytest.raises(SpecError, match="aligned"):
        Record("bad", "", [u8("a", ""), u16("b", "")])
    with pytest.raises(SpecError, match="add up"):
        Record("bad", "", [u64("a", "")], size=16)
    with pytest.raises(SpecError, match="overlap"):
        u8("f", "", [Bits("x", 0, 4, ""), Bits("y", 3, 2, "")])


def test_record_sizes_are_the_documented_ones():
    assert (spec.CMD.size, spec.CPL.size, spec.OOB.size, spec.IDENTIFY.size) == (64, 16, 40, 256)
    assert spec.OOB_CRC_SPAN == spec.OOB.size - 4


def test_bit_ranges_compose_and_decompose():
    sf = spec.CPL.compose("sf", phase=1, status=spec.Status.INVALID_TOKEN)
    assert sf == (spec.Status.INVALID_TOKEN << 1) | 1
    assert spec.CPL.decompose("sf", sf) == {"phase": 1, "status": spec.Status.INVALID_TOKEN}


def test_enums_are_unique_and_documented():
    for enum in spec.ENUMS:
        values = [int(m) for m in enum]
        assert len(values) == len(set(values)), enum
        for m in enum:
            assert m.doc, f"{enum.__name__}.{m.name} has no meaning"
    assert all(0 < s < (1 << 15) for s in spec.Status if s != spec.Status.SUCCESS)


def test_oob_crc_detects_corruption():
    raw = spec.pack_oob(kind=spec.Kind.DATA, lba=123, seq=9, vseq=9, group_len=1)
    assert spec.unpack_oob(raw).lba == 123
    assert zlib.crc32(raw[:spec.OOB_CRC_SPAN]) == spec.OOB.unpack(raw).crc
    for bit in (0, 77, 8 * spec.OOB.size - 1):
        bad = bytearray(raw)
        bad[bit // 8] ^= 1 << (bit % 8)
        assert spec.unpack_oob(bytes(bad)) is None
    assert spec.unpack_oob(b"\xff" * spec.OOB.size) is None  # erased page


@pytest.mark.parametrize("rec", spec.RECORDS, ids=lambda r: r.name)
def test_amaranth_layout_matches_python_bytes(rec):
    layout = layouts.layout_of(rec)
    rng = random.Random(RNG_SEED)
    for _ in range(20):
        values = random_values(rec, rng)
        init = {}
        for f in rec.fields:
            if f.bits:
                init[f.name] = {b.name: (values[f.name] >> b.lsb) & ((1 << b.width) - 1) for b in f.bits}
                values[f.name] &= sum(b.mask for b in f.bits)  # padding bits are zero in a layout const
            else:
                init[f.name] = values[f.name]
        const = data.Const(layout, layout.const(init).as_value().value)
        assert const.as_value().value == int.from_bytes(rec.pack(values), "little")


def test_onfi_timing_cycles_round_up():
    cyc = spec.onfi_timing_cycles(0, 100_000_000)  # 10 ns period
    assert cyc["tWP"] == 5 and cyc["tWHR"] == 12
    cyc = spec.onfi_timing_cycles(5, 100_000_000)
    assert cyc["tDS"] == 1  # 7 ns rounds up to one cycle


# -- C side -------------------------------------------------------------------

def _c_fill(rec: Record) -> str:
    """C that assigns every member of rec's struct from v[] (bit ranges via the
    generated SET macros, from separately supplied sub-values)."""
    lines = [f"static void fill_{rec.name}(af_{rec.name}_t *s, const uint64_t *v) {{", "    size_t i = 0;"]
    for f in rec.fields:
        if f.bits:
            lines.append(f"    s->{f.name} = 0;")
            for b in f.bits:
                macro = f"AF_{rec.name.upper()}_{f.name.upper()}_{b.name.upper()}_SET"
                lines.append(f"    s->{f.name} = {macro}(s->{f.name}, ({f.ctype})v[i++]);")
        else:
            lines.append(f"    s->{f.name} = ({f.ctype})v[i++];")
    lines.append("}")
    return "\n".join(lines)


def _c_values(rec: Record, values: dict) -> list[int]:
    out = []
    for f in rec.fields:
        if f.bits:
            out += [(values[f.name] >> b.lsb) & ((1 << b.width) - 1) for b in f.bits]
        else:
            out.append(values[f.name])
    return out


def test_c_header_packs_byte_identically(tmp_path):
    header = runner.spec_header()
    fills = "\n".join(_c_fill(r) for r in spec.RECORDS)
    cases = "\n".join(
        f'        if (!strcmp(name, "{r.name}")) {{ af_{r.name}_t s; memset(&s, 0xA5, sizeof s); '
        f"fill_{r.name}(&s, v); dump(&s, sizeof s); continue; }}"
        for r in spec.RECORDS)
    source = f"""
#include <stdio.h>
#include <string.h>
#include <inttypes.h>
#include "atomflash_spec.h"
{fills}
static void dump(const void *p, size_t n) {{
    for (size_t i = 0; i < n; i++) printf("%02x", ((const uint8_t *)p)[i]);
    printf("\\n");
}}
int main(void) {{
    char name[64]; unsigned count;
    while (scanf("%63s %u", name, &count) == 2) {{
        uint64_t v[1024];  /* values of one record: Identify Controller has hundreds of fields */
        for (unsigned i = 0; i < count; i++) scanf("%" SCNu64, &v[i]);
        if (!strcmp(name, "oobcrc")) {{  /* v[0..] are bytes: print af_crc32 of them */
            uint8_t b[64]; for (unsigned i = 0; i < count; i++) b[i] = (uint8_t)v[i];
            printf("%08x\\n", af_crc32(b, count)); continue;
        }}
{cases}
        return 2;
    }}
    return 0;
}}
"""
    src = tmp_path / "pack.c"
    src.write_text(source)
    exe = tmp_path / "pack"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function",
                    f"-I{header.parent}", str(src), "-o", str(exe)], check=True)

    rng = random.Random(RNG_SEED)
    stdin, want = [], []
    for rec in spec.RECORDS:
        for _ in range(50):
            values = random_values(rec, rng)
            for f in rec.fields:  # bits outside named ranges are not representable in C
                if f.bits:
                    values[f.name] &= sum(b.mask for b in f.bits)
            vals = _c_values(rec, values)
            stdin.append(f"{rec.name} {len(vals)} " + " ".join(map(str, vals)))
            want.append(rec.pack(values).hex())
    for _ in range(20):
        body = rng.randbytes(spec.OOB_CRC_SPAN)
        stdin.append(f"oobcrc {len(body)} " + " ".join(map(str, body)))
        want.append(f"{spec.crc32(body):08x}")
    got = subprocess.run([str(exe)], input="\n".join(stdin), capture_output=True, text=True, check=True)
    assert got.stdout.split() == want


def test_crc_table_is_the_spec_crc():
    table = gen_c.crc_table(spec.OOB_CRC)
    # entry n: the register after byte n from zero (zlib takes and returns the xored form)
    assert [zlib.crc32(bytes([n]), 0xFFFFFFFF) ^ 0xFFFFFFFF for n in range(256)] == table
    header = gen_c.generate()
    assert all(f"0x{v:08x}u" in header for v in table)


def test_c_crc32_matches_zlib(tmp_path):
    """af_crc32 (aligned and unaligned starts, any length) / af_crc32_update
    piece by piece / af_crc32_extend (the CRC of a concatenation from the
    second part's CRC alone) against zlib, in a program of two C files (the
    weak table links once) and as C++."""
    header = runner.spec_header()
    other = tmp_path / "other.c"
    other.write_text('#include "atomflash_spec.h"\n'
                     "uint32_t other_crc(const void *d, size_t n) { return af_crc32(d, n); }\n")
    src = tmp_path / "crc.c"
    src.write_text(r"""
#include <stdio.h>
#include <string.h>
#include "atomflash_spec.h"
uint32_t other_crc(const void *d, size_t n);
static uint8_t a[8192], b[8192];
static size_t hex(const char *s, uint8_t *out) {
    size_t n = 0; unsigned v;
    while (s[0] && s[0] != '-' && sscanf(s, "%2x", &v) == 1) { out[n++] = (uint8_t)v; s += 2; }
    return n;
}
int main(void) {
    static char sa[16400], sb[16400];
    while (scanf("%16399s %16399s", sa, sb) == 2) {
        size_t na = hex(sa, a), nb = hex(sb, b);
        uint32_t whole = af_crc32_update(af_crc32_update(AF_CRC32_INIT, a, na), b, nb) ^ AF_CRC32_XOROUT;
        uint32_t ext = af_crc32_extend(af_crc32_update(AF_CRC32_INIT, a, na), af_crc32(b, nb),
                                       af_crc32_shift(nb)) ^ AF_CRC32_XOROUT;
        printf("%08x %08x %08x %08x", af_crc32(a, na), other_crc(b, nb), whole, ext);
        for (size_t k = 1; k < 4; k++)  /* unaligned starts: bytes up to a word boundary first */
            printf(" %08x", af_crc32(a + k, na > k ? na - k : 0));
        printf("\n");
    }
    return 0;
}
""")
    exe = tmp_path / "crc"
    flags = ["-Wall", "-Wextra", "-Werror", "-Wno-unused-function", f"-I{header.parent}"]
    subprocess.run(["gcc", "-std=c11", *flags, str(src), str(other), "-o", str(exe)], check=True)
    cxx = tmp_path / "crc.cpp"
    cxx.write_text('#include "atomflash_spec.h"\nint main() { return af_crc32("123456789", 9) != 0xcbf43926u; }\n')
    subprocess.run(["g++", *flags, str(cxx), "-o", str(tmp_path / "crcxx")], check=True)
    subprocess.run([str(tmp_path / "crcxx")], check=True)

    rng = random.Random(RNG_SEED)
    cases = [(b"123456789", b""), (b"", b"123456789"), (b"", b"")]
    cases += [(rng.randbytes(rng.randrange(0, 64)), rng.randbytes(rng.randrange(0, 64))) for _ in range(40)]
    cases += [(rng.randbytes(2048), rng.randbytes(n)) for n in (1, 2047, 2048, 4096, 8192)]
    stdin = "\n".join(f"{x.hex() or '-'} {y.hex() or '-'}" for x, y in cases)
    got = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.split("\n")
    for (x, y), line in zip(cases, got):
        cat = zlib.crc32(x + y)
        unaligned = [f"{zlib.crc32(x[k:]):08x}" for k in (1, 2, 3)]
        assert line.split() == [f"{zlib.crc32(x):08x}", f"{zlib.crc32(y):08x}", f"{cat:08x}", f"{cat:08x}",
                                *unaligned], (x, y)
    assert len([g for g in got if g]) == len(cases)


def test_c_mlc_pairing_is_the_spec_rule(tmp_path):
    """af_mlc_paired_lower / af_mlc_upper_of (the NAND model damages by them) against
    spec.mlc_paired_lower / mlc_upper_of (the core's rule) for every page of several block sizes;
    and the rule itself: every page is exactly one of lower or upper, the pairs are inverse, and
    an upper page comes 2 or 3 pages after its lower one."""
    header = runner.spec_header()
    src = tmp_path / "mlc.c"
    src.write_text('#include <stdio.h>\n#include "atomflash_spec.h"\n'
                   "int main(void) { long long ppb, p;\n"
                   "  while (scanf(\"%lld %lld\", &ppb, &p) == 2)\n"
                   "    printf(\"%lld %lld\\n\", (long long)af_mlc_paired_lower(p, ppb), (long long)af_mlc_upper_of(p, ppb));\n"
                   "  return 0; }\n")
    exe = tmp_path / "mlc"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function",
                    f"-I{header.parent}", str(src), "-o", str(exe)], check=True)
    cases = [(ppb, p) for ppb in (4, 8, 16, 64, 128, 256) for p in range(ppb)]
    got = subprocess.run([str(exe)], input="\n".join(f"{b} {p}" for b, p in cases), capture_output=True,
                         text=True, check=True).stdout.split("\n")
    for (ppb, p), line in zip(cases, got):
        lower, upper = spec.mlc_paired_lower(p, ppb), spec.mlc_upper_of(p, ppb)
        assert line.split() == [str(lower), str(upper)], (ppb, p)
        assert (lower < 0) != (upper < 0), (ppb, p)
        if upper >= 0:
            assert spec.mlc_paired_lower(upper, ppb) == p and upper - p in (2, 3)
    assert len([g for g in got if g]) == len(cases)


def test_header_follows_the_spec(monkeypatch):
    before = gen_c.generate()
    assert "typedef struct" in before and "af_oob_t" in before
    changed = Record(spec.OOB.name, spec.OOB.doc,
                     [*spec.OOB.fields[:-1], u32_field("extra"), spec.OOB["crc"]])
    monkeypatch.setattr(spec, "RECORDS", [changed if r is spec.OOB else r for r in spec.RECORDS])
    after = gen_c.generate()
    assert after != before
    assert "extra;" in after and "sizeof(af_oob_t) == 44" in after


def u32_field(name):
    from atomflash.specdsl import u32
    return u32(name, "added by the test")


def test_gen_c_cli_writes_header(tmp_path):
    out = tmp_path / "h" / "atomflash_spec.h"
    assert gen_c.main([str(out)]) == 0
    assert out.read_text() == gen_c.generate()


def test_register_maps_are_consistent_and_generated():
    from atomflash.specdsl import Register, RegisterMap
    with pytest.raises(SpecError, match="overlaps"):
        RegisterMap("m", "", 0x20, [Register("a", 0, "ro", ""), Register("b", 0, "rw", "")])
    with pytest.raises(SpecError, match="outside"):
        RegisterMap("m", "", 0x20, [Register("a", 0x10, "ro", "", count=5, stride=4)])
    with pytest.raises(SpecError, match="access"):
        Register("a", 0, "wr", "")
    header = gen_c.generate()
    regs = spec.HOST_REGS
    assert f"#define AF_HOSTQ_CTRL 0x{regs['ctrl'].offset:x}u" in header
    assert f"#define AF_HOSTQ_SQ_TAIL(i) (0x{regs['sq_tail'].offset:x}u + (i) * 0x{regs['sq_tail'].stride:x}u)" in header
    assert regs["sq_tail"].address(1) == regs["sq_tail"].offset + regs["sq_tail"].stride
    ftl = spec.FTL_REGS
    assert f"#define AF_FTL_RELOC_DONE_RESULT_SHIFT {ftl['reloc_done'].bits[1].lsb}u" in header
    assert "#define AF_FTL_CTRL_MAP_GO 0x10u" in header
