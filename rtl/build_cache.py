"""Build caches: Amaranth to Verilog once per design and configuration, and
ccache for the C++ that Verilator generates.

Converting the FTL core (or the SoC's controller, which carries it) takes
20-30 s of Python, which every test, SoC build and campaign worker would
otherwise pay again for the same text.  :func:`write_verilog` keeps the Verilog in
``out_dir/<name>.v`` and, beside it, ``<name>.v.key``: a fingerprint of what
produced it (the caller's ``key``, which must name every constructor
argument, the Amaranth version, and the text of every Python file under the
source trees the design is built from) and the SHA-256 of the Verilog
written.  When both match, the component is not converted at all.  A lock
file beside the ``.v`` makes concurrent callers (pytest-xdist workers, the
SoC build in the background) convert it once: the others wait, then find it
cached.

Without a ``key`` the design is always converted (designs built in a test
file, whose arguments nothing here can see).  Either way the ``.v`` is only
rewritten when its text changes, so Verilator and make stay cached.

:func:`compiler_cache_env`: every Verilator build (a dozen cocotb models, the
SoC) compiles the same runtime (verilated.cpp, verilated_vpi.cpp, ...; ~13 s
of g++ each); Verilator's makefiles prefix the compiler with ``$(OBJCACHE)``,
so with ccache installed (``make deps``) only the first build compiles it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parents[1]
# the trees a design's text can depend on: the gateware, the spec (host/atomflash/spec.py
# and what it imports) and the SoC's and boards' wrappers (soc/ftl_bridge.py, boards/nand_bridge.py)
SOURCE_TREES = (ROOT / "rtl", ROOT / "host" / "atomflash", ROOT / "soc", ROOT / "boards")

__all__ = ["write_verilog", "write_if_changed", "fingerprint", "compiler_cache_env", "locked", "locked_file"]


@contextmanager
def locked_file(lock_path: Path):
    """Hold an exclusive ``flock`` on ``lock_path`` (created) for the ``with`` block: concurrent builders
    of one output (pytest-xdist workers, the SoC build in the background, campaign workers) take turns."""
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)   # released when the file closes
        yield


def locked(directory: Path):
    """:func:`locked_file` on ``directory/.lock``: one build directory, one builder at a time."""
    return locked_file(Path(directory) / ".lock")


def write_if_changed(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (atomically) unless it already holds it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def fingerprint(name: str, key: Any, sources: Iterable[Path] = ()) -> str:
    """The hash of everything the Verilog of ``name`` configured by ``key`` depends on:
    the Python files of :data:`SOURCE_TREES` and ``sources`` (more files, e.g. a test's top level)."""
    import amaranth

    h = hashlib.sha256()
    h.update(json.dumps({"name": name, "key": key, "amaranth": amaranth.__version__},
                        sort_keys=True, default=repr).encode())
    files = [f for tree in SOURCE_TREES for f in sorted(Path(tree).rglob("*.py"))]
    for f in files + [Path(s).resolve() for s in sources]:
        h.update(str(f).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _cached(path: Path, want: str) -> bool:
    try:
        stored = json.loads(path.with_suffix(".v.key").read_text())
        return (stored.get("fingerprint") == want
                and stored.get("verilog_sha256") == hashlib.sha256(path.read_bytes()).hexdigest())
    except (OSError, ValueError):
        return False


def _mark_used(component) -> None:
    """A component taken from the cache is never elaborated: tell Amaranth it and the elaboratables
    it built in its constructor were used (else each warns UnusedElaboratable when collected)."""
    from amaranth._unused import MustUse

    seen, todo = set(), [component]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend(obj)
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, MustUse):
            obj._MustUse__used = True
            todo.extend(vars(obj).values())


def write_verilog(component, name: str, out_dir: Path, *, key: Any = None, sources: Iterable[Path] = (),
                  **convert_kwargs) -> Path:
    """``out_dir/<name>.v``: ``component`` as Verilog module ``name``.

    ``key``: a JSON-able description of the component's configuration (every
    argument it was built with); given, an earlier conversion with the same
    key and sources is reused.  ``sources``: files outside
    :data:`SOURCE_TREES` the design comes from (a test's own top level)."""
    path = Path(out_dir) / f"{name}.v"
    want = fingerprint(name, [key, convert_kwargs], sources) if key is not None else None
    with locked_file(path.with_suffix(".v.lock")):
        if want is not None and _cached(path, want):
            _mark_used(component)
            return path
        from amaranth.back import verilog

        text = verilog.convert(component, name=name, **convert_kwargs)
        write_if_changed(path, text)
        if want is not None:
            record = {"fingerprint": want, "verilog_sha256": hashlib.sha256(text.encode()).hexdigest()}
            write_if_changed(path.with_suffix(".v.key"), json.dumps(record) + "\n")
        return path


def compiler_cache_env() -> dict[str, str]:
    """Environment for a Verilator ``make``: ``OBJCACHE=ccache`` when ccache is
    installed, its cache in build/ccache unless ``CCACHE_DIR`` says otherwise
    (``OBJCACHE=`` in the environment turns it off)."""
    if "OBJCACHE" in os.environ or shutil.which("ccache") is None:
        return {}
    return {"OBJCACHE": "ccache", "CCACHE_DIR": os.environ.get("CCACHE_DIR", str(ROOT / "build" / "ccache"))}
