"""Build-and-run glue between pytest, Amaranth, Verilator and cocotb.

Every cocotb module -- the tests in ``tb/``, the benchmarks and demos in
``sim/`` -- runs through :func:`run`:

* Amaranth designs are written to Verilog with :func:`amaranth_verilog`, only
  rewriting the file when it changed (and, given a ``key``, only converted
  when the design's sources or arguments changed);
* each Verilator model is built once into ``build/sim/<build_name>`` and shared
  by every test (and every pytest-xdist worker) that names the same build; a
  file lock serialises builders, Verilator's skip-identical and make's
  dependency tracking make an unchanged rebuild nearly free;
* cocotb's results file is checked: a run that executed no test, or any failed
  test, raises AssertionError (fails the pytest test, or the tool).

Firmware C built for the host (a simulator, a test's driver or shared library)
goes through :func:`host_build`: one gcc run per distinct input, cached in
build/ by a hash of everything the artifact depends on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from rtl.build_cache import compiler_cache_env, locked, write_if_changed, write_verilog

ROOT = Path(__file__).resolve().parents[2]   # sim/harness/runner.py
BUILD = ROOT / "build"
GEN = BUILD / "gen"

# Amaranth's Verilog carries WIDTH/CASEINCOMPLETE patterns Verilator warns about.
# Splitting the generated C++ keeps gcc's time per file bounded and lets make
# compile on every core (large designs otherwise spend minutes in one file).
VERILATOR_ARGS = ["-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-UNOPTFLAT",
                  "--output-split", "20000", "--output-split-cfuncs", "20000"]
BUILD_JOBS = str(os.cpu_count() or 2)
HOST_CC = "gcc"


def amaranth_verilog(component, name: str, *, key=None, sources=(), **kwargs) -> Path:
    """Write ``component`` as Verilog module ``name`` to build/rtl/<name>.v;
    with ``key`` (its constructor arguments; ``sources``: files outside rtl/
    it comes from) an unchanged design is not converted again
    (:mod:`rtl.build_cache`)."""
    return write_verilog(component, name, BUILD / "rtl", key=key, sources=sources, **kwargs)


def spec_header() -> Path:
    """Generate build/gen/atomflash_spec.h (the C view of atomflash.spec)."""
    from atomflash import gen_c

    return write_if_changed(GEN / "atomflash_spec.h", gen_c.generate())


@functools.cache
def _host_compiler_identity() -> bytes:
    """Which gcc builds (its path and version): a new compiler is a new artifact."""
    version = subprocess.run([HOST_CC, "--version"], capture_output=True, check=True).stdout
    return f"{shutil.which(HOST_CC)}\0".encode() + version


def host_build(
    name: str,
    sources: Sequence[Path],
    *,
    build_dir: str,
    cflags: Sequence[str],
    defines: Sequence[str] = (),
    includes: Sequence[Path] = (),
    shared: bool = False,
    try_flags: Sequence[str] = (),
    try_check: Callable[[Path], object] | None = None,
) -> Path:
    """Compile C ``sources`` for the host with gcc into build/<build_dir>/<name>-<hash>
    (``shared``: a ``.so``) and return it; an artifact already built from the same inputs is reused.

    The spec header (:func:`spec_header`) and ``includes`` are on the include path.  The hash covers
    the sources, every ``.h`` in the include directories and beside the sources, the flags and the
    compiler, so an edit anywhere the build can see makes a new artifact.  ``try_flags`` (sanitizers)
    are used when gcc accepts them and ``try_check(artifact)`` passes; when either raises
    CalledProcessError the artifact is built without them.  The build writes a temporary name and
    renames it into place, so concurrent builders (pytest-xdist workers) never see a partial file.
    """
    header = spec_header()
    sources = [Path(s) for s in sources]
    include_dirs = [header.parent, *(Path(d) for d in includes)]
    flags = [*cflags, *(["-fPIC", "-shared"] if shared else []), *(f"-D{d}" for d in defines)]
    header_dirs = dict.fromkeys([*include_dirs, *(s.parent for s in sources)])
    headers = sorted({h for d in header_dirs for h in d.glob("*.h")})
    digest = hashlib.sha256(_host_compiler_identity())
    digest.update(json.dumps([flags, list(try_flags), [os.path.relpath(d, ROOT) for d in include_dirs]]).encode())
    for path in [*sources, *headers]:
        digest.update(os.path.relpath(path, ROOT).encode() + b"\0" + path.read_bytes() + b"\0")
    suffix = ".so" if shared else ""
    stem = f"{name}-{digest.hexdigest()[:16]}"
    out_dir = BUILD / build_dir
    artifact = out_dir / f"{stem}{suffix}"
    if artifact.exists():
        return artifact
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{stem}.{os.getpid()}{suffix}"

    def compile_with(extra: Sequence[str]) -> None:
        subprocess.run(["nice", HOST_CC, *flags, *extra, *(f"-I{d}" for d in include_dirs),
                        *map(str, sources), "-o", str(tmp)], check=True, capture_output=True, text=True)

    try:
        if try_flags:
            try:
                compile_with(try_flags)
                if try_check is not None:
                    try_check(tmp)
            except subprocess.CalledProcessError:  # the toolchain lacks them (e.g. no sanitizer runtime)
                compile_with(())
        else:
            compile_with(())
        os.replace(tmp, artifact)
    finally:
        tmp.unlink(missing_ok=True)
    return artifact


def run(
    *,
    toplevel: str,
    sources: Sequence[Path | str],
    test_module: str,
    build_name: str,
    test_dir: Path | str,
    build_args: Iterable[str] = (),
    parameters: Mapping[str, object] | None = None,
    plusargs: Iterable[str] = (),
    extra_env: Mapping[str, str] | None = None,
    testcase: str | Sequence[str] | None = None,
    seed: int | None = None,
    timescale: tuple[str, str] = ("1ns", "1ps"),
    waves: bool | None = None,
) -> Path:
    """Build (once) and run cocotb ``test_module`` against ``toplevel``.

    Returns the results XML path; raises AssertionError when cocotb ran no
    test or any test failed.
    """
    from cocotb.runner import get_results, get_runner

    build_dir = BUILD / "sim" / build_name
    if waves is None:
        waves = os.environ.get("WAVES", "") == "1"
    runner = get_runner("verilator")
    os.environ.setdefault("MAKEFLAGS", f"-j{BUILD_JOBS}")
    os.environ.update(compiler_cache_env())  # cocotb's runner runs make with this process's environment
    with locked(build_dir):
        runner.build(
            verilog_sources=[str(s) for s in sources],
            hdl_toplevel=toplevel,
            build_args=[*VERILATOR_ARGS, *build_args],
            parameters=dict(parameters or {}),
            build_dir=build_dir,
            timescale=timescale,
            waves=waves,
            log_file=build_dir / "build.log",
        )
    run_dir = build_dir / "runs" / uuid.uuid4().hex[:12]
    run_dir.mkdir(parents=True)
    # cocotb's runner hands the simulator PYTHONPATH = this process's sys.path
    # (an extra_env PYTHONPATH is overwritten), so the cocotb module's folder
    # and the repository root must be on sys.path itself.
    for path in (str(Path(test_dir).resolve()), str(ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)
    env = {
        "COCOTB_RESOLVE_X": "ZEROS",
        **(extra_env or {}),
    }
    results = runner.test(
        test_module=test_module,
        hdl_toplevel=toplevel,
        testcase=testcase,
        seed=seed,
        plusargs=list(plusargs),
        extra_env=env,
        build_dir=build_dir,
        test_dir=run_dir,
        waves=waves,
    )
    num_tests, num_failed = get_results(results)
    assert num_tests > 0, f"cocotb ran no test from {test_module}"
    assert num_failed == 0, f"{num_failed} of {num_tests} cocotb tests failed (see {results})"
    return results
