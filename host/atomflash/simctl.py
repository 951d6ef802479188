"""Run the simulated atomflash SSD in the background, the way a host sees a drive.

``atomflash sim start`` (:func:`start`) builds the SoC (cached, ``soc/sim.py``),
prepares a run directory and leaves a small supervisor process running
(:func:`serve`, ``python -m atomflash.simctl serve DIR``).  The supervisor
owns the simulator: it holds the firmware console on a pty, appends all of
it to ``console.log`` and relays it to clients of ``console.sock`` (``atomflash
console``); the simulator's host port is a TCP port (``sim.json``), which
:meth:`atomflash.Device.attach_sim` connects to.

Run directory (default ``build/run`` in the source tree)::

    sim.json        port, pids, build, NAND configuration, state
    console.log     everything the firmware printed, every boot
    console.sock    the console, for `atomflash console`
    nand<i>.img     the NAND images: they persist, a restart is a power cycle
    nand<i>.cfg     the models' configuration
    sim_config.js, modules/, *.init   what the simulator reads (:func:`prepare_run_dir`)

Stopping: :func:`stop` ends the simulation cleanly (the console's ``exit``);
``power_cut=True`` kills it at once, mid-whatever -- a power cut at a random
instant.  A power cut *during* a program or erase (a torn page) is a NAND
model setting: ``target_set=[{"power_cut_program": k, "power_cut_finish": 1}]``
ends the simulation while target 0 programs its k-th page.  :class:`NandControl`
does the same on a running simulation, counted from *now* (the SoC's
``nandctl`` CSRs, over the host port).
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import console_text, spec

__all__ = ["SimConfig", "SimError", "BootPowerLost", "SimDeadline", "NandControl", "power_lost", "start", "stop", "status", "serve", "console_command", "boot_report",
           "default_run_dir", "source_root"]

BOOT_DONE = "Type 'help'."


class SimError(RuntimeError):
    """The simulation could not be started, reached or stopped."""


class BootPowerLost(SimError):
    """The boot lost power: a NAND model's power cut ended the simulation before the host interface
    came up (an armed cut: ``power_cut_*`` keys, or ``atomflash sim cut`` before a restart)."""


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float | None:
    """CPU time (user + system, all threads) process ``pid`` has used, or None if it cannot be read."""
    if not pid:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK   # utime, stime: fields 14 and 15 of stat(5)


class SimDeadline:
    """A timeout counted in the simulator's own CPU seconds, not the wall clock's.

    A simulator runs at the same speed in its own time however loaded the machine is; on a busy one
    (a nice'd campaign beside ``make test``: campaign trial 5707's boot was failed after 600 wall
    seconds that bought the simulator a fraction of that) a wall-clock limit fails a healthy run.  A firmware that hangs spins the simulator, so its CPU time still reaches the limit.  As a
    backstop for a simulator that blocks instead, ``wall_factor`` times the limit in wall time ends
    the wait too.  ``pid``: the simulator's, or a callable giving it (None while not yet started:
    the wall clock counts until then)."""

    def __init__(self, seconds: float, pid, *, wall_factor: float = 10.0):
        self.seconds = seconds
        self._pid = pid if callable(pid) else (lambda: pid)
        self._wall_end = time.monotonic() + seconds * wall_factor
        self._wall0 = time.monotonic()
        self._cpu0 = None
        self.used()   # the simulator's CPU time now, when it runs already

    def used(self) -> float:
        """Seconds of the limit used: the simulator's CPU time since the start, else the wall clock's."""
        pid = self._pid()
        cpu = cpu_seconds(pid)
        if cpu is None:
            return time.monotonic() - self._wall0
        if self._cpu0 is None:   # the first reading: wall time before it (no simulator yet) counts as CPU time
            self._cpu0 = cpu - (time.monotonic() - self._wall0)
        return cpu - self._cpu0

    def expired(self) -> bool:
        return self.used() >= self.seconds or time.monotonic() >= self._wall_end


class NandControl:
    """The NAND models' control port (``atomflash.nandsim.NandCtl``) on a
    running simulation: the SoC's ``nandctl`` CSRs (``soc/nand_sim.py``
    NandModelControl), reached over the host port.  ``transport``: an
    ``atomflash.transport`` link (e.g. ``Device.t``); ``csr_csv``: the build's
    ``csr.csv`` (``sim.json`` names it).

    :meth:`schedule_cut` arms a cut counted from the moment it runs -- the
    k-th program (or erase, or program of an OOB kind) from now, or an
    instant ``ns`` from now -- so a campaign cuts inside its workload without
    calibrating what the boot did."""

    def __init__(self, transport, csr_csv: Path | str):
        from .device import CsrMap

        self.t = transport
        self.regs = CsrMap.read(csr_csv).group("nandctl")
        if not self.regs:
            raise SimError(f"{csr_csv}: this build has no NAND model control port (nandctl CSRs)")

    @classmethod
    def attach(cls, transport, run_dir: Path | str) -> "NandControl":
        return cls(transport, json.loads((Path(run_dir) / "sim.json").read_text())["csr_csv"])

    def _write(self, name: str, value: int) -> None:
        addr, words = self.regs[name]
        value &= (1 << (32 * words)) - 1
        self.t.write(addr, [(value >> (32 * (words - 1 - i))) & 0xFFFFFFFF for i in range(words)])

    def _read(self, name: str) -> int:
        return _read_csr(self.t, self.regs[name])

    def cycle(self) -> int:
        """Clock edges since power-on: the models' time is this x the clock period."""
        return self._read("cycle")

    def run(self, targets, op: int, arg0: int = 0, arg1: int = 0, arg2: int = 0) -> int:
        """Run ``op`` on every target in ``targets``; returns the first one's answer (signed)."""
        targets = sorted(set(targets))
        if not targets or min(targets) < 0:
            raise ValueError(f"targets {targets}: name one or more models")
        self._write("op", int(op))
        self._write("arg0", arg0)
        self._write("arg1", arg1)
        self._write("arg2", arg2)
        self._write("control", sum(1 << t for t in targets) | 1 << 31)
        for _ in range(50):
            if self._read("status") & 1:
                r = self._read("result")
                return r - (1 << 64) if r >> 63 else r
        raise SimError(f"the NAND models {targets} did not answer control operation {op}")

    def schedule_cut(self, targets, when: int, k: int = 0, *, ns: int = 0, progress: float | None = None,
                     kind: int = 0, clk_hz: int = 100_000_000) -> None:
        """Arm a cut on ``targets`` (``nandsim.NandCutWhen``): the ``k``-th program/erase from now
        (``kind``: of pages of that OOB kind), or ``ns`` simulated nanoseconds from now (AT_TIME).
        ``progress``: how far the torn operation got (0..1; None: the model's setting)."""
        from .nandsim import NandCtl, NandCutWhen

        if when == NandCutWhen.AT_TIME:
            arg1 = self.cycle() * 10**9 // clk_hz + ns
        elif when == NandCutWhen.PROGRAM_KIND:
            arg1 = k | kind << 32
        else:
            arg1 = k
        arg2 = 0 if progress is None else max(1, min(999, round(progress * 1000)))
        if self.run(targets, NandCtl.SCHEDULE_CUT, int(when), arg1, arg2) != 0:
            raise SimError(f"the NAND models refused the cut ({NandCutWhen(when).name}, {arg1})")


@contextlib.contextmanager
def debug_port(run_dir: Path | str, dev=None):
    """The debug port (UARTBone) of the simulation in ``run_dir``, for what only it reaches (the NAND
    models' controls, the SoC's CSRs): ``dev``'s own link when the Device is on it, else a connection of
    its own for the ``with`` block (a host on NVMe)."""
    if dev is not None and hasattr(dev, "t"):      # a Device on the debug port (an NvmeDevice has none)
        yield dev.t
        return
    from .transport import UartBoneTransport

    t = UartBoneTransport(json.loads((Path(run_dir) / "sim.json").read_text())["port"])
    try:
        yield t
    finally:
        t.close()


def bus_errors(transport, run_dir: Path | str) -> int:
    """The SoC's bus errors since power-on (LiteX's ``ctrl_bus_errors`` CSR):
    accesses the per-master bus timeout ended (``soc/bus_timeout.py``).  A
    healthy device has none, whatever the host does."""
    from .device import CsrMap

    csr_csv = json.loads((Path(run_dir) / "sim.json").read_text())["csr_csv"]
    reg = CsrMap.read(csr_csv).registers.get("ctrl_bus_errors")
    if reg is None:
        raise SimError(f"{csr_csv}: no ctrl_bus_errors CSR")
    return _read_csr(transport, reg)


def _read_csr(transport, reg: tuple[int, int]) -> int:
    """A CSR (byte address, 32-bit words, most significant first) over the host port."""
    value = 0
    for w in transport.read(*reg):
        value = (value << 32) | w
    return value


def source_root() -> Path:
    """The atomflash source tree (the sim verbs build and run its SoC)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "soc" / "sim.py").exists():
        raise SimError(f"the sim verbs need the atomflash source tree (no soc/sim.py under {root})")
    return root


def default_run_dir() -> Path:
    return Path(os.environ.get("ATOMFLASH_RUN_DIR") or source_root() / "build" / "run")


@dataclass
class SimConfig:
    """What to simulate.  ``blocks_per_lun`` 0: the profile's own."""

    channels: int = 2
    ways: int = 2
    profile: str = "small"
    blocks_per_lun: int = 8
    cache_pages: int = spec.LIMITS.CACHE_PAGES   # the core's volatile write cache (another size: a build of its own)
    host_queues: int = 2              # host queue pairs (the firmware's own comes on top; another count: a build of its own)
    image: str | None = None          # image path prefix (default: the run directory's nand<i>.img)
    nand_set: dict = field(default_factory=dict)           # model keys for every target
    target_set: list = field(default_factory=list)         # model keys per target (power cuts, faults)
    sdram: bool = False               # main RAM and host memory in a simulated SDRAM, as on a board (a build of its own)
    pgo: bool = False                 # a profile-guided model (soc/sim.py --pgo: faster, built twice; a build of its own)
    nvme: bool = False                # the drive as an NVMe device on a simulated PCIe link (a build of its own)
    etherbone: bool = False           # the Etherbone host link on a simulated Ethernet port (a build of its own)

    def build_args(self) -> list[str]:
        extra = ["--cache-pages", str(self.cache_pages)] if self.cache_pages != spec.LIMITS.CACHE_PAGES else []
        if self.host_queues != 2:
            extra += ["--host-queues", str(self.host_queues)]
        if self.sdram:
            extra += ["--sdram"]
        if self.pgo:
            extra += ["--pgo"]
        if self.nvme:
            extra += ["--pcie", "nvme"]
        if self.etherbone:
            extra += ["--etherbone"]
        return ["--channels", str(self.channels), "--ways", str(self.ways), "--nand-profile", self.profile,
                *extra, "-q"]


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as dead
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _read_state(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / "sim.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _write_state(run_dir: Path, state: dict) -> None:
    tmp = run_dir / "sim.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(run_dir / "sim.json")


def _free_port(kind=socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(run_dir: Path | None = None) -> dict:
    """``sim.json`` plus ``running`` (the supervisor and simulator are alive)."""
    run_dir = Path(run_dir or default_run_dir())
    state = _read_state(run_dir) or {}
    state["running"] = _alive(state.get("supervisor_pid")) and _alive(state.get("vsim_pid"))
    state["run_dir"] = str(run_dir)
    return state


RUN_LINKS = ("modules", "sim_rom.init", "sim_sram.init", "sim_main_ram.init", "sim_mem.init", "csr.csv")


def prepare_run_dir(gw: Path, run_dir: Path, *, host_port: int | None = None,
                    etherbone_port: int | None = None) -> Path:
    """A directory Vsim can run in besides the gateware directory ``gw`` (a
    build of ``soc/sim.py``): links to what it reads from its working directory
    (``modules/``, the memory images) and its own ``sim_config.js`` -- the
    gateware's, plus ``serial2tcp`` on the host port when ``host_port`` is given
    and the Ethernet gateway ``eth2udp`` on UDP ``etherbone_port`` (a build with
    ``--etherbone``).
    Several simulations of one build run side by side this way, each with its port."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in RUN_LINKS:
        src = gw / name if name != "csr.csv" else gw.parent / name
        dst = run_dir / name
        if not src.exists() or (dst.is_symlink() and dst.resolve() == src.resolve()):
            continue
        if dst.is_symlink() or dst.exists():
            dst.unlink()
        dst.symlink_to(src.resolve())
    cfg = json.loads((gw / "sim_config.js").read_text())
    if host_port is not None:
        # the module binds the pads named "serial"; the host port is serial index 1
        # (soc.atomflash_soc.AtomflashSoC.add_host_port).  hostport2tcp (soc/hostport2tcp.c) sends an
        # answer in one segment; a build from before it (a campaign's frozen copy) has LiteX's serial2tcp
        module = "hostport2tcp" if (gw / "modules" / "hostport2tcp.so").exists() else "serial2tcp"
        cfg.insert(-1, {"module": module, "interface": [{"name": "serial", "index": 1}, "sys_clk"],
                        "args": {"port": str(host_port)}})
    if etherbone_port is not None:
        if not (gw / "modules" / "eth2udp.so").exists():
            raise SimError(f"{gw}: a build without the Ethernet port (soc/sim.py --etherbone)")
        cfg.insert(-1, {"module": "eth2udp", "interface": [{"name": "eth", "index": 0}, "sys_clk"],
                        "args": etherbone_gateway_args(etherbone_port)})
    (run_dir / "sim_config.js").write_text(json.dumps(cfg, indent=4))
    return run_dir


def etherbone_gateway_args(port: int) -> dict:
    """``soc/eth2udp.c``'s arguments: UDP ``port`` on 127.0.0.1, the simulated SoC's Ethernet
    address (``spec.ETHERBONE``) and the gateway's."""
    from .spec import ETHERBONE as eb

    return {"port": str(port), "ip": eb.ip, "mac": eb.mac_text(eb.mac), "udp_port": str(eb.udp_port),
            "gateway_ip": eb.gateway_ip, "gateway_mac": eb.mac_text(eb.gateway_mac)}


def vsim_command(gw: Path, plusargs=()) -> list[str]:
    """The simulator of the gateware directory ``gw`` with ``plusargs`` (``+`` added where missing)."""
    return [str(gw / "obj_dir" / "Vsim"), *[a if a.startswith("+") else "+" + a for a in plusargs]]


def build(cfg: SimConfig | None = None, *, log=None) -> Path:
    """Build the simulated SoC for ``cfg`` (cached: about 17 s to find it up
    to date) and return its gateware directory, for :func:`start`."""
    cfg = cfg or SimConfig()
    root = source_root()
    # In a child process: LiteX/Migen name some logic differently on a second
    # build in one process, which would defeat soc/sim.py's Verilator cache.
    r = subprocess.run([sys.executable, str(root / "soc" / "sim.py"), "--build-only", *cfg.build_args()],
                       cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise SimError(f"the SoC build failed:\n{r.stdout[-3000:]}")
    if log is not None:
        log(r.stdout)
    return Path(r.stdout.strip().splitlines()[-1])


def freeze_gateware(gw: Path, dest: Path) -> Path:
    """A copy of what a simulation runs from (``Vsim``, ``modules/``, the memory images, ``sim_config.js``,
    ``csr.csv``) under ``dest``: the shared build may be rebuilt while a long campaign runs (a test, a
    firmware change), and a running ``Vsim`` whose binary is replaced dies (SIGBUS).  Returns the copy's
    gateware directory.  One copy per build (named by the binary's time stamp, the memory images and the modules,
    so a firmware-only rebuild gets a copy of its own), so a replay started while a campaign runs in the
    same directory shares its copy instead of replacing it."""
    import hashlib
    import shutil

    h = hashlib.sha256(str((gw / "obj_dir" / "Vsim").stat().st_mtime_ns).encode())
    for f in sorted(gw.glob("*.init")):   # the firmware is in the memory images, not the binary
        h.update(f.name.encode() + f.read_bytes())
    for f in sorted((gw / "modules").glob("*.so")):   # the simulator's modules: the host port's among them
        h.update(f.name.encode() + f.read_bytes())
    dest = dest.with_name(f"{dest.name}-{h.hexdigest()[:16]}")
    dest_gw = dest / "gateware"
    if (dest / "csr.csv").exists():
        return dest_gw
    shutil.rmtree(dest, ignore_errors=True)
    (dest_gw / "obj_dir").mkdir(parents=True)
    shutil.copy2(gw / "obj_dir" / "Vsim", dest_gw / "obj_dir" / "Vsim")
    shutil.copytree(gw / "modules", dest_gw / "modules")
    for f in gw.iterdir():
        if f.suffix in (".init", ".js"):
            shutil.copy2(f, dest_gw / f.name)
    shutil.copy2(gw.parent / "csr.csv", dest / "csr.csv")
    return dest_gw


def start(run_dir: Path | None = None, cfg: SimConfig | None = None, *, fresh: bool = False,
          boot_timeout: float = 900.0, log=None, gateware: Path | None = None) -> dict:
    """Build (cached) and start the simulation; returns once the firmware's
    console is up (boot, recovery and the host interface done).  ``fresh``:
    delete the NAND images first (a factory-new device).  ``gateware``: a
    directory :func:`build` returned for this ``cfg`` (skips the build check;
    runs that start often, like the power-fault campaign, build once)."""
    cfg = cfg or SimConfig()
    run_dir = Path(run_dir or default_run_dir()).resolve()
    st = status(run_dir)
    if st["running"]:
        raise SimError(f"a simulation already runs in {run_dir} (port {st.get('port')}): atomflash sim stop")
    from . import nandsim, spec

    clk_hz = int(spec.NAND_CLK_HZ)   # what cfg.build_args() builds (soc/sim.py's --sys-clk-freq default)
    t0 = time.monotonic()
    gw = Path(gateware).resolve() if gateware is not None else build(cfg, log=log)
    build_s = time.monotonic() - t0
    run_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    etherbone_port = _free_port(socket.SOCK_DGRAM) if cfg.etherbone else None
    prepare_run_dir(gw, run_dir, host_port=port, etherbone_port=etherbone_port)
    pcie_port = None
    if cfg.nvme:
        from .pcie_link import add_sim_module

        pcie_port = _free_port()
        add_sim_module(run_dir / "sim_config.js", pcie_port)
    overrides = dict(cfg.nand_set)
    if cfg.blocks_per_lun:
        overrides.setdefault("blocks_per_lun", cfg.blocks_per_lun)
    cfgs = nandsim.model_configs(run_dir, profile=cfg.profile, targets=cfg.channels * cfg.ways,
                                 clk_hz=clk_hz, image_prefix=cfg.image, overrides=overrides,
                                 per_target=cfg.target_set)
    for c in cfgs:
        img = Path(c["image"])
        if fresh:
            img.unlink(missing_ok=True)
            c.stats_path().unlink(missing_ok=True)
        elif img.exists() and img.stat().st_size:
            with nandsim.Image(img) as im:
                if im.geometry != c.geometry:
                    raise SimError(f"{img} holds a {im.geometry} flash, this run asks for {c.geometry}: "
                                   "start with --fresh (a new device) or another --dir")
    plusargs = nandsim.write_configs(run_dir, cfgs)
    log_path = run_dir / "console.log"
    boot_offset = log_path.stat().st_size if log_path.exists() else 0
    state = {
        "port": port, "pcie_port": pcie_port, "etherbone_port": etherbone_port, "csr_csv": str(gw.parent / "csr.csv"), "gateware": str(gw),
        "vsim": vsim_command(gw, plusargs), "images": [c["image"] for c in cfgs],
        "config": {"channels": cfg.channels, "ways": cfg.ways, "profile": cfg.profile, "cache_pages": cfg.cache_pages,
                   "host_queues": cfg.host_queues, "sdram": cfg.sdram, "blocks_per_lun": cfg.blocks_per_lun, "nand_set": cfg.nand_set, "target_set": cfg.target_set,
                   "nvme": cfg.nvme, "etherbone": cfg.etherbone},
        "clk_hz": clk_hz, "started": time.time(), "boot_offset": boot_offset,
        "build_seconds": round(build_s, 1), "supervisor_pid": None, "vsim_pid": None, "exit": None,
        "spec_version": spec.SPEC_VERSION,
    }
    _write_state(run_dir, state)
    sup_log = open(run_dir / "supervisor.log", "ab")
    sup = subprocess.Popen([sys.executable, "-m", "atomflash.simctl", "serve", str(run_dir)],
                           stdin=subprocess.DEVNULL, stdout=sup_log, stderr=sup_log, start_new_session=True,
                           cwd=run_dir, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    keep_niceness(sup.pid)
    sup_log.close()
    deadline = SimDeadline(boot_timeout, lambda: (_read_state(run_dir) or {}).get("vsim_pid"))
    while True:
        st = status(run_dir)
        text = boot_text(run_dir)
        if BOOT_DONE in text:
            return status(run_dir)
        if sup.poll() is not None or (st.get("exit") is not None):
            if power_lost(run_dir):
                raise BootPowerLost("the boot lost power (a NAND power cut ended the simulation before the host "
                                    "interface came up; start it again to recover); last output:\n"
                                    + "\n".join(text.splitlines()[-15:]))
            raise SimError(f"the simulation ended during boot (exit {st.get('exit')}); last output:\n"
                           + "\n".join(text.splitlines()[-15:]))
        if deadline.expired():
            stop(run_dir, power_cut=True)
            raise SimError(f"no console prompt within {boot_timeout:.0f} s of the simulator's time; last output:\n"
                           + "\n".join(text.splitlines()[-15:]))
        time.sleep(0.1)   # the simulator idles at the prompt until we see it: a campaign boots thousands of times


def boot_text(run_dir: Path | None = None) -> str:
    """The console output of the current (or last) run, as the terminal shows it."""
    run_dir = Path(run_dir or default_run_dir())
    st = _read_state(run_dir) or {}
    try:
        with open(run_dir / "console.log", "rb") as f:
            f.seek(st.get("boot_offset", 0))
            raw = f.read()
    except FileNotFoundError:
        return ""
    return console_text.render(raw.decode(errors="replace"))


def power_lost(run_dir: Path | None = None) -> bool:
    """A NAND model cut the power in the current (or last) run: its console says so."""
    return "power lost at" in boot_text(run_dir)


def boot_report(run_dir: Path | None = None) -> str:
    """The firmware's boot report of the current run (up to its first prompt)."""
    text = boot_text(run_dir)
    end = text.find(BOOT_DONE)
    return text[:end + len(BOOT_DONE)] if end >= 0 else text


def stop(run_dir: Path | None = None, *, power_cut: bool = False, timeout: float = 60.0) -> dict:
    """End the simulation: the console's ``exit`` (clean), or at once (``power_cut``)."""
    run_dir = Path(run_dir or default_run_dir())
    st = status(run_dir)
    if not st["running"]:
        return st
    if not power_cut:
        try:
            console_command("exit", run_dir, timeout=timeout, expect_prompt=False)
        except SimError:
            pass
        deadline = time.monotonic() + timeout
        while _alive(st["vsim_pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
    if _alive(st["vsim_pid"]):
        os.kill(st["vsim_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(st["supervisor_pid"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    if _alive(st["supervisor_pid"]):
        os.kill(st["supervisor_pid"], signal.SIGKILL)
    st = _read_state(run_dir) or st
    st["stopped"] = "power cut" if power_cut else "clean"
    _write_state(run_dir, st)
    return status(run_dir)


def wait_exit(run_dir: Path | None = None, timeout: float = 600.0) -> dict:
    """Until the simulation ends by itself (e.g. a NAND model's power cut)."""
    run_dir = Path(run_dir or default_run_dir())
    deadline = SimDeadline(timeout, status(run_dir).get("vsim_pid"))
    while status(run_dir)["running"]:
        if deadline.expired():
            raise SimError(f"the simulation still runs after {timeout:.0f} s of its time")
        time.sleep(0.05)
    sup, until = status(run_dir).get("supervisor_pid"), time.monotonic() + 10
    while _alive(sup) and time.monotonic() < until:   # it records the exit, then ends
        time.sleep(0.02)
    return status(run_dir)


# -- the console ------------------------------------------------------------------

def _console_socket(run_dir: Path) -> socket.socket:
    path = run_dir / "console.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
    except OSError:
        s.close()
        raise SimError(f"no simulation console at {path} (atomflash sim start)") from None
    return s


def console_command(line: str, run_dir: Path | None = None, *, timeout: float = 300.0,
                    expect_prompt: bool = True) -> str:
    """Send one console command; returns its output up to the next prompt (`console_text.command_output`)."""
    run_dir = Path(run_dir or default_run_dir())
    s = _console_socket(run_dir)
    try:
        for ch in line.encode() + b"\r":  # the UART's receive FIFO is small: a character at a time
            s.sendall(bytes([ch]))
            time.sleep(0.002)
        if not expect_prompt:
            return ""
        raw, deadline = b"", SimDeadline(timeout, status(run_dir).get("vsim_pid"))
        while True:
            r, _, _ = select.select([s], [], [], 0.5)
            if r:
                chunk = s.recv(65536)
                if not chunk:
                    raise SimError("the simulation ended during the command")
                raw += chunk  # strip escapes from the whole text: the UART splits them across reads
                done = console_text.command_output(console_text.render(raw.decode(errors="replace")), line)
                if done:
                    return done[0].strip("\n")
            if deadline.expired():
                raise SimError(f"console: no prompt after {line!r} within {timeout:.0f} s of the simulator's time")
    finally:
        s.close()


def console_interactive(run_dir: Path | None = None) -> int:
    """Attach this terminal to the console; Ctrl-] detaches (the simulation keeps running)."""
    import termios
    import tty

    run_dir = Path(run_dir or default_run_dir())
    s = _console_socket(run_dir)
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    print("atomflash console: Ctrl-] detaches (the simulation keeps running)", file=sys.stderr)
    try:
        if saved is not None:
            tty.setraw(fd)
        s.sendall(b"\r")
        while True:
            r, _, _ = select.select([s, fd], [], [])
            if s in r:
                data = s.recv(65536)
                if not data:
                    return 0
                os.write(sys.stdout.fileno(), data)
            if fd in r:
                data = os.read(fd, 1024)
                if not data or b"\x1d" in data:
                    return 0
                s.sendall(data.replace(b"\n", b"\r"))
    finally:
        if saved is not None:
            termios.tcsetattr(fd, termios.TCSAFLUSH, saved)
        s.close()


# -- the supervisor ------------------------------------------------------------------

def keep_niceness(pid: int) -> None:
    """Give a process started with ``setsid`` (an autogroup of its own) our niceness *as a group*.

    Linux schedules every autogroup as one unit, whatever its processes' nice values, so a simulator
    in a new one would take an equal share of the machine even when started by a nice'd campaign.
    Writing ``/proc/<pid>/autogroup`` lowers that group's weight instead (best effort: nothing
    happens where autogroups are off or the file is not writable)."""
    n = os.nice(0)
    if n > 0:
        try:
            Path(f"/proc/{pid}/autogroup").write_text(str(min(n, 19)))
        except OSError:
            pass


def serve(run_dir: Path) -> int:
    """Own the simulator: console pty -> console.log + console.sock clients."""
    run_dir = Path(run_dir)
    state = _read_state(run_dir)
    master, slave = pty.openpty()
    proc = subprocess.Popen(state["vsim"], cwd=run_dir, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, close_fds=True)
    keep_niceness(proc.pid)
    os.close(slave)
    state.update(supervisor_pid=os.getpid(), vsim_pid=proc.pid)
    _write_state(run_dir, state)
    sock_path = run_dir / "console.sock"
    sock_path.unlink(missing_ok=True)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock_path))
    srv.listen(4)
    clients: list[socket.socket] = []
    log = open(run_dir / "console.log", "ab")

    def end(*_):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)

    signal.signal(signal.SIGTERM, end)
    try:
        while True:
            try:
                r, _, _ = select.select([master, srv, *clients], [], [], 0.5)
            except InterruptedError:
                continue
            if master in r:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    data = b""
                if not data:
                    break
                log.write(data)
                log.flush()
                for c in list(clients):
                    try:
                        c.sendall(data)
                    except OSError:
                        clients.remove(c)
            if srv in r:
                c, _ = srv.accept()
                clients.append(c)
            for c in [c for c in clients if c in r]:
                try:
                    data = c.recv(4096)
                except OSError:
                    data = b""
                if data:
                    os.write(master, data)
                else:
                    clients.remove(c)
                    c.close()
            if proc.poll() is not None and master not in r:
                break
    finally:
        rc = proc.wait()
        log.close()
        for c in clients:
            c.close()
        srv.close()
        sock_path.unlink(missing_ok=True)
        state = _read_state(run_dir) or state
        state["exit"] = rc
        state["ended"] = time.time()
        _write_state(run_dir, state)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        sys.exit(serve(Path(sys.argv[2])))
    print("usage: python -m atomflash.simctl serve RUN_DIR (started by `atomflash sim start`)", file=sys.stderr)
    sys.exit(2)
