"""The firmware's layers call downward only (firmware/layers.txt; docs/firmware.md, "Layers").

Read from the sources, nothing is built:

* every ``firmware/*.c`` and ``*.h`` belongs to a module of the table, and every
  module of the table exists;
* a file includes (``#include "x.h"``) only headers of its own module or of the
  modules before it.  The firmware builds with
  ``-Werror=implicit-function-declaration``, so a call needs the callee's
  header: includes are the calls;
* no file declares what another module defines (a prototype or an ``extern``
  of it in a ``.c`` file, or in another module's header): the way around the
  includes, as ``af_idle`` once was (fw.h declared it, main.c defined it, the
  console called it).  ``extern`` does not appear in a ``.c`` file at all.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRMWARE = ROOT / "firmware"
STANDS_IN = "nocore"   # its definitions stand in for other modules' (builds without the FTL core)


def read_table(firmware: Path) -> list[tuple[str, str, str]]:
    """(layer, module, header) lowest first, from layers.txt."""
    table = []
    for line in (firmware / "layers.txt").read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        layer, modules = line[0], line[1:]
        for m in modules:
            name, _, header = re.fullmatch(r"(\w+)(\(([\w.]+)\))?", m).group(1, 2, 3)
            table.append((layer, name, header or f"{name}.h"))
    return table


def strip(text: str) -> str:
    """C text without comments, string and character literals, and preprocessor lines."""
    text = re.sub(r"\\\n", " ", text)
    text = re.sub(r'/\*.*?\*/|//[^\n]*|"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'',
                  lambda m: " " if m.group(0)[0] == "/" else '""', text, flags=re.S)
    return re.sub(r"^[ \t]*#[^\n]*", "", text, flags=re.M)


ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")


def top_level(text: str) -> list[tuple[str, bool]]:
    """The file-scope statements of stripped C text: (a function definition's head, True), or (a declaration
    or definition up to its `;`, braces and what is in them left out, False)."""
    out, depth, start, head_end = [], 0, 0, 0
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                head_end = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and re.search(r"\)\s*$", ATTRIBUTE.sub(" ", text[start:head_end])):
                out.append((text[start:head_end], True))      # a function's body ends the statement
                start = i + 1
        elif c == ";" and depth == 0:
            stmt = text[start:i]
            while re.search(r"\{[^{}]*\}", stmt):
                stmt = re.sub(r"\{[^{}]*\}", " ", stmt)     # a struct's members, an initializer
            out.append((stmt, False))
            start = i + 1
    return [(s.strip(), body) for s, body in out if s.strip()]


def declarator(stmt: str) -> tuple[str | None, bool]:
    """(name, is a function) of a file-scope declaration or definition; (None, _) for what declares no
    object or function of its own (a typedef, a tag, a macro invocation such as AF_COMMAND)."""
    stmt = ATTRIBUTE.sub(" ", stmt)
    if re.match(r"(typedef|struct|union|enum)\b[^=(]*$", stmt) or stmt.startswith("typedef"):
        return None, False
    stmt = stmt.split("=", 1)[0].strip()
    m = re.match(r"(.*?)\b(\w+)\s*\(", stmt)
    if m and m.group(1).strip() and not m.group(1).rstrip().endswith("("):
        return m.group(2), True                                   # type name(...)
    if m and not m.group(1).strip():
        return None, False                                        # MACRO(...): no type, a macro invocation
    names = re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*(?:,|$)", stmt)
    return (names[-1] if names else None), False


def scope(stmt: str) -> str:
    words = re.findall(r"\w+", stmt.split("(", 1)[0])
    return "static" if "static" in words else "extern" if "extern" in words else ""


def violations(firmware: Path = FIRMWARE) -> list[str]:
    table = read_table(firmware)
    rank = {name: i for i, (_, name, _) in enumerate(table)}
    layer_of = {name: layer for layer, name, _ in table}
    module_of = {}
    for _, name, header in table:
        module_of[f"{name}.c"] = name
        module_of[header] = name
    bad = []
    files = sorted(p for p in firmware.iterdir() if p.suffix in (".c", ".h"))
    for p in files:
        if p.name not in module_of:
            bad.append(f"{p.name}: not in layers.txt")
    for _, name, header in table:
        if not any((firmware / f).exists() for f in (f"{name}.c", header)):
            bad.append(f"layers.txt: {name}: no {name}.c or {header}")
    # what each module defines (nocore.c's stand-ins aside)
    defined = {}
    texts = {p: strip(p.read_text()) for p in files if p.name in module_of}
    for p, text in texts.items():
        if p.suffix != ".c" or module_of[p.name] == STANDS_IN:
            continue
        for stmt, body in top_level(text):
            name, _ = declarator(stmt)
            if name and scope(stmt) == "" and (body or "(" not in stmt.split("=", 1)[0]):
                defined.setdefault(name, module_of[p.name])
    for p in files:
        if p.name not in module_of:
            continue
        mod = module_of[p.name]
        raw = p.read_text()
        for n, line in enumerate(raw.splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m or m.group(1) not in module_of:
                continue          # not a firmware header (atomflash_spec.h is generated)
            dep = module_of[m.group(1)]
            if rank[dep] > rank[mod]:
                bad.append(f"{p.name}:{n}: includes {m.group(1)}: {dep} ({layer_of[dep]}) is above "
                           f"{mod} ({layer_of[mod]})")
        for stmt, body in top_level(texts[p]):
            if body:
                continue
            name, _ = declarator(stmt)
            where = scope(stmt)
            if where == "extern" and p.suffix == ".c":
                bad.append(f"{p.name}: extern declaration of {name} (declarations belong in headers)")
            elif name and where != "static" and defined.get(name, mod) != mod:
                bad.append(f"{p.name}: declares {name}, which {defined[name]}.c defines (include its header)")
    return bad


def test_the_table_places_every_file():
    assert not [b for b in violations() if "layers.txt" in b]


def test_layers_call_downward_only():
    bad = violations()
    assert not bad, "against the firmware's layering (firmware/layers.txt):\n" + "\n".join(bad)


def test_the_check_finds_what_it_forbids(tmp_path):
    """The check itself, on a small firmware: an upward include, an extern and a prototype of a higher
    module's function (in a .c file and in a header), a file the table does not name."""
    files = {
        "layers.txt": "base  con\nhw  hw(fw.h) drv\ntop  main\n",
        "con.h": "void con_run(void (*idle)(void));\nvoid af_idle(void);\n",
        "con.c": '#include "con.h"\nstatic int n;\nvoid con_run(void (*idle)(void)) { idle(); af_idle(); }\n',
        "fw.h": "extern unsigned long boot_cycles;\nint hw_up(void);\n",
        "hw.c": '#include "fw.h"\n#include "con.h"\nunsigned long boot_cycles;\nint hw_up(void) { return 1; }\n',
        "drv.h": '#include "fw.h"\ntypedef struct { int (*f)(void); } drv_t;\nint drv_go(void);\n',
        "drv.c": ('#include "drv.h"\n#include "main.h"\nextern int hw_up(void);\nvoid af_idle(void);\n'
                  'static const struct { int a; } t[] = { { 1 } };\nint drv_go(void) { return hw_up(); }\n'),
        "main.h": "",
        "main.c": ('#include "con.h"\n#include "drv.h"\nvoid af_idle(void) {}\n'
                   "int main(void) { con_run(af_idle); return drv_go(); }\n"),
        "extra.c": "",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert violations(tmp_path) == [
        "extra.c: not in layers.txt",
        "con.h: declares af_idle, which main.c defines (include its header)",
        "drv.c:2: includes main.h: main (top) is above drv (hw)",
        "drv.c: extern declaration of hw_up (declarations belong in headers)",
        "drv.c: declares af_idle, which main.c defines (include its header)",
    ]
