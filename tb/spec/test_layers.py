"""The layers call downward only (imports read with ``ast``; no module is imported):

* nothing outside ``tb/`` imports the tests: neither ``tb`` nor, by bare name, a
  module that exists only in ``tb/`` (a tool that put a tb folder on ``sys.path``);
* ``host/atomflash``, the package a user installs, imports none of the source
  tree's other layers (``rtl``, ``soc``, ``boards``, ``sim``, ``tb``): ``soc/``
  may call down into atomflash, never the reverse;
* the gateware and the SoC build (``rtl/``, ``soc/``, ``boards/``) import none
  of the tools and tests above them (``sim``, ``tb``).

What tools and tests share lives in ``sim/`` (``sim/harness/``, ``sim/flashimg.py``,
``sim/simboot.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE_TB = ("boards", "host", "rtl", "scripts", "sim", "soc")   # folders of Python outside tb/
FORBIDDEN = {
    "host/atomflash": {"rtl", "soc", "boards", "sim", "tb"},
    "rtl": {"sim", "tb"},
    "soc": {"sim", "tb"},
    "boards": {"sim", "tb"},
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in ``path``, at any depth (a
    function's lazy import counts); relative imports stay inside their package and are left out."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def python_files(root: Path, folders=OUTSIDE_TB) -> list[Path]:
    files = [p for p in root.glob("*.py")]
    for folder in folders:
        files += [p for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(files)


def violations(root: Path = ROOT) -> list[str]:
    outside = python_files(root)
    tb_only = ({p.stem for p in (root / "tb").rglob("*.py") if p.stem != "__init__"}
               - {p.stem for p in outside})
    bad = []
    for path in outside:
        rel = path.relative_to(root).as_posix()
        forbidden = {"tb"}
        for prefix, tops in FORBIDDEN.items():
            if rel.startswith(prefix + "/"):
                forbidden |= tops
        for line, module in imported_modules(path):
            top = module.split(".")[0]
            if top in forbidden:
                bad.append(f"{rel}:{line}: imports {module}")
            elif top in tb_only:
                bad.append(f"{rel}:{line}: imports {module}, a module of tb/ (by bare name)")
    return bad


def test_layers_call_downward_only():
    bad = violations()
    assert not bad, "imports against the layering (tb/spec/test_layers.py):\n" + "\n".join(bad)


def test_the_check_finds_what_it_forbids(tmp_path):
    """The check itself, on a small tree holding one import of each kind it forbids."""
    files = {
        "tb/soc/flashimg_old.py": "",
        "sim/tool.py": "import json\nfrom tb.soc import flashimg_old\n",
        "sim/other.py": "def f():\n    import flashimg_old\n",
        "host/atomflash/simctl.py": "from . import spec\n\ndef start():\n    from soc import sim\n",
        "rtl/nand/bench.py": "from sim.harness import runner\n",
        "soc/sim.py": "from atomflash import simctl\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert violations(tmp_path) == [
        "host/atomflash/simctl.py:4: imports soc",
        "rtl/nand/bench.py:1: imports sim.harness",
        "sim/other.py:2: imports flashimg_old, a module of tb/ (by bare name)",
        "sim/tool.py:2: imports tb.soc",
    ]
