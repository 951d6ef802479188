"""Generate the C/C++ header from :mod:`atomflash.spec`.

    python -m atomflash.gen_c build/gen/atomflash_spec.h

The header is a build output (``make gen``), never committed or edited.  It
serves the RISC-V firmware, the NAND model (C++) and the byte-identity test.
Records become packed structs with size and offset assertions; bit ranges
become SHIFT/MASK macros; enums become #defines plus a name/meaning lookup.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from . import spec
from .specdsl import Record

PREFIX = "AF"


def _c_name(*parts: str) -> str:
    return "_".join(p.upper() for p in (PREFIX, *parts))


def _comment(text: str) -> str:
    return "/* " + text.replace("*/", "* /") + " */"


def _record(out: io.StringIO, rec: Record) -> None:
    tname = f"af_{rec.name}_t"
    out.write(f"\n{_comment(rec.doc)}\n")
    out.write(f"#define {_c_name(rec.name, 'SIZE')} {rec.size}u\n")
    out.write("typedef struct __attribute__((packed)) {\n")
    for f in rec.fields:
        out.write(f"    {f.ctype:9} {f.name};  {_comment(f'@{f.offset}: {f.doc}')}\n")
    out.write(f"}} {tname};\n")
    out.write(f"AF_STATIC_ASSERT(sizeof({tname}) == {rec.size}, \"{rec.name} size\");\n")
    for f in rec.fields:
        out.write(f"AF_STATIC_ASSERT(offsetof({tname}, {f.name}) == {f.offset}, \"{rec.name}.{f.name} offset\");\n")
        for b in f.bits:
            base = _c_name(rec.name, f.name, b.name)
            out.write(f"#define {base}_SHIFT {b.lsb}u  {_comment(b.doc)}\n")
            out.write(f"#define {base}_MASK 0x{b.mask:x}u\n")
            out.write(f"#define {base}_GET(v) (((v) & {base}_MASK) >> {base}_SHIFT)\n")
            out.write(f"#define {base}_SET(v, x) (((v) & ~{base}_MASK) | (((x) << {base}_SHIFT) & {base}_MASK))\n")


def _regmap(out: io.StringIO, regmap) -> None:
    out.write(f"\n{_comment(regmap.doc)}\n#define {_c_name(regmap.name, 'WINDOW_BYTES')} 0x{regmap.size:x}u\n")
    for r in regmap:
        base = _c_name(regmap.name, r.name)
        if r.count > 1:
            out.write(f"#define {base}(i) (0x{r.offset:x}u + (i) * 0x{r.stride:x}u)  "
                      f"{_comment(f'{r.access}, x{r.count}: {r.doc}')}\n")
        else:
            out.write(f"#define {base} 0x{r.offset:x}u  {_comment(f'{r.access}: {r.doc}')}\n")
        for b in r.bits:
            out.write(f"#define {base}_{b.name.upper()} 0x{b.mask:x}u  {_comment(b.doc)}\n")
            if b.width > 1:
                out.write(f"#define {base}_{b.name.upper()}_SHIFT {b.lsb}u\n")


def _enum(out: io.StringIO, enum) -> None:
    name = enum.__name__
    out.write(f"\n/* enum {name} */\n")
    for m in enum:
        out.write(f"#define {_c_name(name, m.name)} 0x{int(m):02x}u  {_comment(m.doc)}\n")
    lname = f"af_{name.lower()}"
    out.write(f"static inline const char *{lname}_name(unsigned v) {{\n    switch (v) {{\n")
    for m in enum:
        out.write(f"    case 0x{int(m):02x}u: return \"{m.name}\";\n")
    out.write("    default: return \"?\";\n    }\n}\n")
    out.write(f"static inline const char *{lname}_doc(unsigned v) {{\n    switch (v) {{\n")
    for m in enum:
        doc = m.doc.replace("\\", "\\\\").replace('"', '\\"')
        out.write(f"    case 0x{int(m):02x}u: return \"{doc}\";\n")
    out.write("    default: return \"unknown\";\n    }\n}\n")


def crc_table(p: spec.CrcParams) -> list[int]:
    """The byte table of a reflected CRC: entry n is the register after
    shifting n through it from zero (what ``af_crc32_table`` holds)."""
    if not (p.reflect_input and p.reflect_output):
        raise NotImplementedError("only reflected CRCs are generated")
    rpoly = int(f"{p.polynomial:0{p.width}b}"[::-1], 2)
    table = []
    for n in range(256):
        for _ in range(8):
            n = (n >> 1) ^ (rpoly if n & 1 else 0)
        table.append(n)
    return table


def _crc(out: io.StringIO, p: spec.CrcParams) -> None:
    # A byte at a time from a 256-entry table derived from the parameters (1 KiB,
    # one copy per program: a weak definition in C, in a section of its own so
    # the linker's --gc-sections drops the copies it did not pick; C++ gets a
    # static copy per file that uses it).  Plus the GF(2) arithmetic
    # that extends a CRC over bytes whose CRC alone is known (a NAND
    # completion's), so a checkpoint's payload CRC needs no software pass.
    if not (p.reflect_input and p.reflect_output and p.width == 32):
        raise NotImplementedError("only reflected 32-bit CRCs are generated")
    rpoly = int(f"{p.polynomial:032b}"[::-1], 2)
    words = [f"0x{v:08x}u" for v in crc_table(p)]
    rows = ",\n".join("    " + ", ".join(words[i:i + 6]) for i in range(0, 256, 6))
    out.write(f"""
/* {p.name}: the OOB record CRC (check value 0x{p.check:08x}).
 * af_crc32(d) == af_crc32_update(AF_CRC32_INIT, d) ^ AF_CRC32_XOROUT; feed
 * af_crc32_update piece by piece to checksum data read in parts. */
#define AF_CRC32_INIT 0x{p.initial_crc:08x}u
#define AF_CRC32_XOROUT 0x{p.xor_output:08x}u
#define AF_CRC32_RPOLY 0x{rpoly:08x}u  /* polynomial 0x{p.polynomial:08x}, reflected */
/* entry n: the register after shifting byte n through it from zero */
#ifdef __cplusplus
static const uint32_t af_crc32_table[256] = {{
#else
__attribute__((weak, section(".rodata.af_crc32_table"))) const uint32_t af_crc32_table[256] = {{
#endif
{rows}
}};
/* whole aligned words where the byte order allows: one load per four bytes */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
typedef uint32_t __attribute__((may_alias)) af_crc32_word_t;
#define AF_CRC32_WORDS 1
#else
#define AF_CRC32_WORDS 0
#endif
static inline uint32_t af_crc32_update(uint32_t crc, const void *data, size_t len) {{
    const uint8_t *b = (const uint8_t *)data;
#if AF_CRC32_WORDS
    for (; len && ((uintptr_t)b & 3u); len--)
        crc = (crc >> 8) ^ af_crc32_table[(crc ^ *b++) & 0xffu];
    for (; len >= 4; len -= 4, b += 4) {{
        crc ^= *(const af_crc32_word_t *)b;
        crc = (crc >> 8) ^ af_crc32_table[crc & 0xffu];
        crc = (crc >> 8) ^ af_crc32_table[crc & 0xffu];
        crc = (crc >> 8) ^ af_crc32_table[crc & 0xffu];
        crc = (crc >> 8) ^ af_crc32_table[crc & 0xffu];
    }}
#endif
    for (; len; len--)
        crc = (crc >> 8) ^ af_crc32_table[(crc ^ *b++) & 0xffu];
    return crc;
}}
static inline uint32_t af_crc32(const void *data, size_t len) {{
    return af_crc32_update(AF_CRC32_INIT, data, len) ^ AF_CRC32_XOROUT;
}}
/* Polynomials mod the CRC's, reflected like its register (bit 31 = x^0):
 * the product a * b. */
static inline uint32_t af_crc32_mulmod(uint32_t a, uint32_t b) {{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {{
        if (a & m)
            p ^= b;
        b = (b & 1u) ? (b >> 1) ^ AF_CRC32_RPOLY : b >> 1;
    }}
    return p;
}}
/* x^(8 len): the factor that carries a register over len bytes (compute once per length). */
static inline uint32_t af_crc32_shift(size_t len) {{
    uint32_t r = 1u << 31, x = 1u << 23;  /* x^0, x^8 */
    for (; len; len >>= 1) {{
        if (len & 1u)
            r = af_crc32_mulmod(r, x);
        x = af_crc32_mulmod(x, x);
    }}
    return r;
}}
/* af_crc32_update(crc, b, len) from af_crc32(b, len) alone (e.g. the CRC a NAND
 * completion carries), shift = af_crc32_shift(len). */
static inline uint32_t af_crc32_extend(uint32_t crc, uint32_t crc_b, uint32_t shift) {{
    return af_crc32_mulmod(shift, crc ^ AF_CRC32_INIT) ^ crc_b ^ AF_CRC32_XOROUT;
}}
""")


def _mlc_pairing(out: io.StringIO) -> None:
    """spec.mlc_paired_lower / mlc_upper_of in C (tb/spec checks them against Python for every page)."""
    out.write("""
/* MLC paired pages (spec.mlc_paired_lower, spec.mlc_upper_of): word line 0 holds
 * pages 0 and 2, word line n pages 2n-1 and 2n+2, the last ppb-3 and ppb-1. */
static inline int64_t af_mlc_paired_lower(int64_t page, int64_t pages_per_block) {
    if (page == 2) return 0;
    if (page == pages_per_block - 1) return pages_per_block - 3;
    if (page >= 4 && page % 2 == 0) return page - 3;
    return -1;
}
static inline int64_t af_mlc_upper_of(int64_t page, int64_t pages_per_block) {
    if (page == 0) return 2;
    if (page % 2 == 1 && page <= pages_per_block - 5) return page + 3;
    if (page == pages_per_block - 3) return pages_per_block - 1;
    return -1;
}
""")


def generate() -> str:
    out = io.StringIO()
    out.write(f"""/* atomflash_spec.h -- GENERATED from host/atomflash/spec.py by atomflash.gen_c.
 * Do not edit: change the spec and run `make gen`.  Spec version {spec.SPEC_VERSION}. */
#ifndef ATOMFLASH_SPEC_H
#define ATOMFLASH_SPEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define AF_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define AF_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
""")
    out.write("\n/* scalars */\n")
    for name, (value, doc) in spec.SCALARS.items():
        out.write(f"#define {_c_name(name)} 0x{value:x}ull  {_comment(doc)}\n")
    for group in spec.CONSTANTS:
        out.write(f"\n{_comment(group.doc)}\n")
        for c in group.items:
            out.write(f"#define {_c_name(group.name, c.name)} {c.value}u  {_comment(c.doc)}\n")
    for enum in spec.ENUMS:
        _enum(out, enum)
    for rec in spec.RECORDS:
        _record(out, rec)
    for regmap in spec.REGISTER_MAPS:
        _regmap(out, regmap)
    _crc(out, spec.OOB_CRC)
    _mlc_pairing(out)

    out.write("\n/* NAND geometry profiles (NandProfile) */\n")
    for p in spec.NAND_PROFILES.values():
        n = p.name.upper()
        out.write(f"{_comment(p.source)}\n")
        for attr in ("page_data", "page_spare", "pages_per_block", "blocks_per_lun", "luns",
                     "t_r_ns", "t_prog_ns", "t_bers_ns"):
            out.write(f"#define {_c_name('NAND', n, attr)} {getattr(p, attr)}u\n")

    _timing_table(out, "ONFI asynchronous timing, ns per mode 0..5", "AF_ONFI", spec.ONFI_TIMING_PARAMS,
                  len(spec.ONFI_MODES), "uint16_t", "ns")
    _timing_table(out, "ONFI NV-DDR2 timing, ps per mode 0..7", "AF_ONFI_DDR2", spec.ONFI_NVDDR2_TIMING_PARAMS,
                  len(spec.ONFI_NVDDR2_MODES), "uint32_t", "ps")
    out.write("/* The NV-DDR2 parameter an SDR check becomes (-1: none of that name, the check does not apply) */\n")
    ddr_index = {name: i for i, (name, _, _) in enumerate(spec.ONFI_NVDDR2_TIMING_PARAMS)}
    equiv = [ddr_index.get(spec.ONFI_NVDDR2_FOR_SDR.get(name, name), -1) for name, _, _ in spec.ONFI_TIMING_PARAMS]
    out.write(f"static const int8_t af_onfi_ddr2_for_sdr[AF_ONFI_TIMING_COUNT] = {{{', '.join(map(str, equiv))}}};\n")
    out.write("/* EDO output hold after the next RE# fall (tRLOH), ns per mode */\n")
    out.write(f"static const uint16_t af_onfi_trloh_ns[AF_ONFI_MODES] = {{{', '.join(str(v) for v in spec.ONFI_TRLOH_NS)}}};\n")
    out.write("\n#endif /* ATOMFLASH_SPEC_H */\n")
    return out.getvalue()


def _timing_table(out: io.StringIO, title: str, prefix: str, params, modes: int, ctype: str, unit: str) -> None:
    """An enum of the parameters, their names, and their values per mode (``prefix``_MODES columns)."""
    lower = prefix.lower()
    out.write(f"\n/* {title} */\n#define {prefix}_MODES {modes}\n")
    out.write(f"enum {lower}_timing {{\n")
    for name, _, doc in params:
        out.write(f"    {prefix}_{name.upper()},  {_comment(doc)}\n")
    out.write(f"    {prefix}_TIMING_COUNT\n}};\n")
    out.write(f"static const char *const {lower}_timing_name[{prefix}_TIMING_COUNT] = {{\n")
    out.write("".join(f"    \"{name}\",\n" for name, _, _ in params))
    out.write("};\n")
    out.write(f"static const {ctype} {lower}_timing_{unit}[{prefix}_TIMING_COUNT][{prefix}_MODES] = {{\n")
    for name, values, _ in params:
        out.write(f"    {{{', '.join(str(v) for v in values)}}},  /* {name} */\n")
    out.write("};\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output", type=Path, help="header to write (e.g. build/gen/atomflash_spec.h)")
    args = ap.parse_args(argv)
    text = generate()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    # Rewrite only on change so make and Verilator do not rebuild needlessly.
    if not args.output.exists() or args.output.read_text() != text:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
