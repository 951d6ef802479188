"""``atomflash``: drive an atomflash device from the shell.

    atomflash sim start [--fresh] [--channels 2 --ways 2 --blocks-per-lun 8]   # the simulated SSD, in the background
    atomflash identify
    atomflash write 10 --data hello --count 4        # LBAs 10..13, each block "hello" repeated
    atomflash read 10 --count 4
    atomflash atomic 20 21 35 --data grp             # one all-or-nothing group
    atomflash tx write 7 40 --data t7 ; atomflash tx commit 7
    atomflash append --data a1 --count 2             # prints the token
    atomflash remap 50:0x...:2
    atomflash open                                   # what is open: transactions, live appends
    atomflash stats ; atomflash console ; atomflash bench --qd 8 --ops 200
    atomflash sim cut --program 3                    # a NAND power cut during the 3rd program from now
    atomflash sim stop [--power-cut]

Every verb takes ``--dir`` (the simulation's run directory, default
``build/run``; ``ATOMFLASH_RUN_DIR``) and ``--help``.  Errors print one line
``atomflash: <verb>: <message>`` and exit non-zero:

====  ==================================================================
code  meaning
====  ==================================================================
1     usage or value error (bad argument, data of the wrong size)
2     argparse usage error
3     no device: no simulation running, the link refused or lost (the
      simulation ended, or lost power under the command)
4     the boot lost power: ``sim start`` saw a NAND power cut end the
      simulation before its host interface came up (start it again)
5     the drive hung: a command did not complete within ``--timeout``
16+s  the device completed the command with status ``s`` (``spec.Status``),
      e.g. 26 = 16 + 0x0A UNKNOWN_TX; the message names the status
====  ==================================================================
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import zlib
from pathlib import Path

from . import errors, simctl, spec
from .spec import Hint

EXIT_VALUE, EXIT_USAGE, EXIT_NO_DEVICE, EXIT_POWER_LOST, EXIT_TIMEOUT, EXIT_STATUS_BASE = 1, 2, 3, 4, 5, 16


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_VALUE):
        super().__init__(message)
        self.code = code


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _nonneg(text: str) -> int:
    v = _int(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return v


def _pos(text: str) -> int:
    v = _int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return v


# -- device access -----------------------------------------------------------------

def _device(args):
    from .device import BadQueue, Device, DeviceError
    from .transport import TransportError

    if getattr(args, "board_csr", None):
        try:
            return Device.attach_board(args.board_csr, server=args.server, etherbone=args.etherbone, qid=args.qid,
                                       timeout=args.timeout)
        except FileNotFoundError as e:
            raise CliError(f"--board-csr: {e.filename}: no such file", EXIT_USAGE) from None
        except ValueError as e:
            raise CliError(f"--{'etherbone' if args.etherbone else 'server'}: {e}", EXIT_USAGE) from None
        except BadQueue as e:
            raise CliError(f"--qid: {e}", EXIT_USAGE) from None
        except errors.CommandTimeout as e:
            raise CliError(str(e), EXIT_TIMEOUT) from None
        except (TransportError, DeviceError, TimeoutError) as e:
            raise CliError(str(e), EXIT_NO_DEVICE) from None
    st = simctl.status(args.dir)
    if not st.get("running"):
        raise CliError(f"no simulation running in {st['run_dir']} (atomflash sim start)", EXIT_NO_DEVICE)
    try:
        return Device.attach_sim(args.dir or simctl.default_run_dir(), qid=args.qid, timeout=args.timeout,
                                 port=args.link)
    except BadQueue as e:
        raise CliError(f"--qid: {e}", EXIT_USAGE) from None
    except errors.CommandTimeout as e:
        raise CliError(str(e), EXIT_TIMEOUT) from None
    except (TransportError, DeviceError, TimeoutError) as e:
        raise CliError(str(e), EXIT_NO_DEVICE) from None


def _blocks(args, dev, count: int, what: str = "") -> bytes:
    """``count`` blocks from --data-file, --data (repeated) or --seed (random)."""
    n = dev.lba_size
    if getattr(args, "data_file", None):
        data = Path(args.data_file).read_bytes()
        if len(data) != count * n:
            if len(data) > count * n or len(data) == 0:
                raise CliError(f"--data-file holds {len(data)} bytes; {count} block(s) are {count * n} bytes")
            data = data + bytes(count * n - len(data))  # a short file is zero-padded to whole blocks
        return data
    if getattr(args, "data", None) is not None:
        unit = args.data.encode()
        if not unit:
            raise CliError("--data is empty")
        return (unit * (n // len(unit) + 1))[:n] * count
    rnd = random.Random(getattr(args, "seed", None) if getattr(args, "seed", None) is not None else time.time_ns())
    return rnd.randbytes(n * count)


def _show_blocks(args, lba: int, data: bytes, n: int) -> None:
    if args.out:
        Path(args.out).write_bytes(data)
        print(f"{len(data)} bytes (lba {lba}..{lba + len(data) // n - 1}) -> {args.out}")
        return
    for i in range(len(data) // n):
        blk = data[i * n:(i + 1) * n]
        head = blk[:32]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in head)
        state = "zeros" if not any(blk) else f"crc32 {zlib.crc32(blk):08x}"
        print(f"lba {lba + i}: {head.hex()}  |{text}|  {state}")


# -- verbs ------------------------------------------------------------------------------

def cmd_sim(args):
    if args.sim_verb == "start":
        cfg = simctl.SimConfig(channels=args.channels, ways=args.ways, profile=args.profile,
                               blocks_per_lun=args.blocks_per_lun, image=args.image, cache_pages=args.cache_pages,
                               host_queues=args.host_queues, sdram=args.sdram, nvme=args.nvme,
                               etherbone=args.ethernet)
        for kv in args.nand_set:
            k, _, v = kv.partition("=")
            if not _:
                raise CliError(f"--nand-set {kv}: expected KEY=VALUE")
            cfg.nand_set[k] = v
        cfg.nand_set.setdefault("power_cut_finish", 1)   # a NAND power cut ends the simulation: the drive is off
        print(f"atomflash: building (cached) and booting the simulated SSD in {args.dir or simctl.default_run_dir()} ...",
              file=sys.stderr)
        try:
            st = simctl.start(args.dir, cfg, fresh=args.fresh)
        except simctl.BootPowerLost as e:
            raise CliError(str(e), EXIT_POWER_LOST) from None
        except simctl.SimError as e:
            raise CliError(str(e), EXIT_NO_DEVICE) from None
        report = simctl.boot_report(args.dir)
        print(report if args.verbose else "\n".join(
            l for l in report.splitlines() if l.startswith(("checkpoint", "recovery", "boot", "ftl", "bbt", "time"))))
        print(f"running: host port tcp://127.0.0.1:{st['port']}, console: atomflash console, "
              f"stop: atomflash sim stop")
        if st.get("etherbone_port"):
            print(f"Ethernet: Etherbone on udp://127.0.0.1:{st['etherbone_port']} (atomflash --link etherbone ...)")
    elif args.sim_verb == "stop":
        st = simctl.status(args.dir)
        if not st["running"]:
            raise CliError(f"no simulation running in {st['run_dir']}", EXIT_NO_DEVICE)
        simctl.stop(args.dir, power_cut=args.power_cut)
        print("stopped" + (" (power cut: whatever was in flight is lost)" if args.power_cut else " cleanly"))
    elif args.sim_verb == "cut":
        _sim_cut(args)
    else:
        st = simctl.status(args.dir)
        if args.json:
            print(json.dumps(st, indent=2))
            return
        if not st.get("port"):
            print(f"no simulation in {st['run_dir']}")
            return
        state = "running" if st["running"] else f"not running (last exit {st.get('exit')}, {st.get('stopped', 'ended')})"
        c = st["config"]
        print(f"{state}\nrun dir   {st['run_dir']}\nhost port tcp://127.0.0.1:{st['port']}\n"
              f"flash     {c['channels']} channels x {c['ways']} ways, profile {c['profile']}, "
              f"{c['blocks_per_lun'] or 'profile'} blocks per LUN"
              + (f", write cache {c['cache_pages']} pages" if c.get("cache_pages") else "")
              + (f", {c['host_queues']} host queues" if c.get("host_queues") else "")
              + f"\nimages    {', '.join(st['images'])}")
        if st["running"]:
            print(f"up        {time.time() - st['started']:.0f} s (wall), pid {st['vsim_pid']}")


def _sim_cut(args):
    """Arm a NAND power cut on the running simulation, counted from now (simctl.NandControl)."""
    from .nandsim import NandCutWhen
    from .transport import TransportError, UartBoneTransport

    st = simctl.status(args.dir)
    if not st["running"]:
        raise CliError(f"no simulation running in {st['run_dir']} (atomflash sim start)", EXIT_NO_DEVICE)
    c = st["config"]
    n = c["channels"] * c["ways"]
    targets = sorted(set(args.target)) if args.target else list(range(n))
    if targets[-1] >= n:
        raise CliError(f"--target {targets[-1]}: the flash has targets 0 .. {n - 1}", EXIT_USAGE)
    if args.kind is not None:
        when, k, what = NandCutWhen.PROGRAM_KIND, args.program or 1, f"program of a {args.kind.upper()} page"
    elif args.program:
        when, k, what = NandCutWhen.PROGRAM, args.program, "program"
    elif args.erase:
        when, k, what = NandCutWhen.ERASE, args.erase, "erase"
    else:
        when, k, what = NandCutWhen.AT_TIME, 0, ""
    if args.progress is not None and not 0 < args.progress < 1:
        raise CliError(f"--progress {args.progress}: a fraction between 0 and 1 (exclusive)", EXIT_USAGE)
    try:
        with UartBoneTransport(st["port"], timeout=15) as t:
            simctl.NandControl.attach(t, args.dir or simctl.default_run_dir()).schedule_cut(
                targets, when, k, ns=args.at_ns or 0, progress=args.progress,
                kind=int(spec.Kind[args.kind.upper()]) if args.kind else 0, clk_hz=st.get("clk_hz", 100_000_000))
    except (TransportError, simctl.SimError) as e:
        raise CliError(str(e), EXIT_NO_DEVICE) from None
    on = f"target{'s' if len(targets) > 1 else ''} {', '.join(map(str, targets))}"
    if when == NandCutWhen.AT_TIME:
        print(f"armed: {on} lose power {args.at_ns} ns of simulated time from now")
    else:
        print(f"armed: {on} lose power during the {_nth(k)} {what} from now (each target counts its own)")
    if not c.get("nand_set", {}).get("power_cut_finish"):
        print("note: this simulation was started with power_cut_finish=0: the NAND goes dark but the simulation "
              "runs on (atomflash sim stop)")


def _nth(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def cmd_identify(args):
    with _device(args) as dev:
        info = dev.info
        if args.json:
            print(json.dumps({k: v for k, v in info.items() if not k.startswith("rsvd")}, indent=2))
            return
        for k, v in info.items():
            if not k.startswith("rsvd") and k != "magic":
                print(f"{k:18} {v}")


def cmd_read(args):
    with _device(args) as dev:
        data = dev.tx_read(args.tid, args.lba, args.count) if getattr(args, "tid", 0) else dev.read(args.lba, args.count)
        _show_blocks(args, args.lba, data, dev.lba_size)


def cmd_write(args):
    with _device(args) as dev:
        data = _blocks(args, dev, args.count)
        dev.write(args.lba, data, fua=args.fua)
        print(f"wrote lba {args.lba}..{args.lba + args.count - 1}")


def cmd_trim(args):
    with _device(args) as dev:
        dev.trim(args.lba, args.count)
        print(f"trimmed lba {args.lba}..{args.lba + args.count - 1}")


def cmd_flush(args):
    with _device(args) as dev:
        dev.flush()
        print("flushed: every acknowledged write is durable")


def cmd_hint(args):
    with _device(args) as dev:
        dev.hint(Hint[args.hint.upper()])
        print(f"hint {args.hint.upper()} done")


def cmd_atomic(args):
    with _device(args) as dev:
        data = _blocks(args, dev, len(args.lbas))
        n = dev.lba_size
        dev.atomic_write([(lba, data[i * n:(i + 1) * n]) for i, lba in enumerate(args.lbas)])
        print(f"atomic group of {len(args.lbas)} committed: lba {', '.join(map(str, args.lbas))}")


def cmd_tx(args):
    with _device(args) as dev:
        if args.tx_verb == "write":
            dev.tx_write(args.tid, args.lba, _blocks(args, dev, args.count), final=args.final, new=args.new)
            print(f"tx {args.tid}: staged lba {args.lba}..{args.lba + args.count - 1}"
                  + (" and committed (final)" if args.final else ""))
        elif args.tx_verb == "read":
            _show_blocks(args, args.lba, dev.tx_read(args.tid, args.lba, args.count), dev.lba_size)
        elif args.tx_verb == "commit":
            dev.tx_commit(args.tid)
            print(f"tx {args.tid}: committed")
        else:
            dev.tx_abort(args.tid)
            print(f"tx {args.tid}: aborted")


def cmd_append(args):
    with _device(args) as dev:
        token = dev.append(_blocks(args, dev, args.count), fua=args.fua)
        print(f"0x{token:016x}")


def _triple(text: str):
    parts = text.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LBA:TOKEN:COUNT")
    lba, token, n = (_int(p) for p in parts)
    if lba < 0 or n < 0 or not 0 <= token < 1 << 64:
        raise argparse.ArgumentTypeError(f"{text!r}: out of range")
    return lba, token, n


def cmd_remap(args):
    with _device(args) as dev:
        dev.remap(args.triples)
        print(f"remapped {len(args.triples)} triple(s)")


def cmd_release(args):
    with _device(args) as dev:
        dev.release(args.token)
        print(f"released 0x{args.token:016x}")


def cmd_open(args):
    with _device(args) as dev:
        ol = dev.open_list()
    if args.json:
        print(json.dumps({"transactions": [{"tid": t, "pages": p, "doomed": d} for t, p, d in ol.transactions],
                          "appends": [{"token": f"0x{tok:016x}", "nlb": n} for tok, n in ol.appends]}, indent=2))
        return
    if not ol.transactions and not ol.appends:
        print("nothing open")
    for tid, pages, doomed in ol.transactions:
        print(f"tx {tid}: {pages} page(s) staged" + (" (doomed: a write failed; abort it)" if doomed else "")
              + f"  -> atomflash tx commit {tid} | tx abort {tid}")
    for token, nlb in ol.appends:
        print(f"append 0x{token:016x}: {nlb} block(s)  -> atomflash remap LBA:0x{token:016x}:{nlb} | "
              f"release 0x{token:016x}")


def cmd_stats(args):
    with _device(args) as dev:
        s = dev.stats(fresh=True)   # counts the commands just run
    hz = s["clk_hz"] or 1
    s["uptime_ms"] = round(s["uptime_cycles"] / hz * 1000, 3)
    s["boot_ms"] = round(s["boot_cycles"] / hz * 1000, 3)
    s["recovery_ms"] = round(s["boot_scan_cycles"] / hz * 1000, 3)
    # flash programs (data, records, GC and wear copies, checkpoints) per page the host wrote
    s["write_amp"] = round(s["nand_programs"] / s["host_write_pages"], 2) if s["host_write_pages"] else None
    try:
        s["no_space"] = spec.NoSpace(s["no_space"]).name     # why writes get NO_SPACE (NONE: they do not)
    except ValueError:
        pass
    if args.json:
        print(json.dumps(s, indent=2))
        return
    for k, v in s.items():
        print(f"{k:22} {v}")


def cmd_console(args):
    if args.command:
        try:
            print(simctl.console_command(" ".join(args.command), args.dir, timeout=args.timeout))
        except simctl.SimError as e:
            raise CliError(str(e), EXIT_NO_DEVICE) from None
        return
    if not simctl.status(args.dir)["running"]:
        raise CliError("no simulation running (atomflash sim start)", EXIT_NO_DEVICE)
    try:
        simctl.console_interactive(args.dir)
    except simctl.SimError as e:
        raise CliError(str(e), EXIT_NO_DEVICE) from None


def cmd_sql(args):
    from . import sqlite as afsql

    with _device(args) as dev:
        for row in afsql.run_sql(dev, args.db, args.sql, mode=args.mode):
            print("|".join("" if v is None else str(v) for v in row))


def cmd_bench(args):
    from .bench import BenchConfig, run_bench

    cfg = BenchConfig(pattern=args.pattern, read_pct=args.read_pct, qd=args.qd, ops=args.ops,
                      duration=args.duration, block_count=args.count, atomic=args.atomic, tx=args.tx,
                      zipf=args.zipf, span=args.span, seed=args.seed)
    with _device(args) as dev:
        res = run_bench(dev, cfg, progress=not args.json and sys.stderr.isatty() or args.progress)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"atomflash bench: {res['config']}")
    t.add_column("figure")
    t.add_column("value", justify="right")
    for k, v in res["results"].items():
        t.add_row(k, f"{v:,.3f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v))
    Console().print(t)


# -- parser --------------------------------------------------------------------------------

def _data_opts(p, count=True):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--data", help="text repeated to fill each block")
    g.add_argument("--data-file", help="raw bytes (zero-padded to whole blocks)")
    g.add_argument("--seed", type=_int, help="random blocks from this seed (default: random)")
    if count:
        p.add_argument("--count", type=_pos, default=1, help="blocks")


def build_parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="atomflash", description="Drive an atomflash device (the simulated SSD) from the shell.",
                                  epilog="atomflash VERB --help describes each verb; exit codes: 1 value error, "
                                         "2 usage, 3 no device, 4 the boot lost power, 5 the drive hung, "
                                         "16 + status for device errors.")
    top.add_argument("--version", action="version", version=f"atomflash {__import__('atomflash').__version__} "
                                                           f"(spec {spec.SPEC_VERSION})")
    # --dir/--timeout/--qid go before or after the verb (SUPPRESS: a verb's absent option keeps the top's)
    dir_help = "the simulation's run directory (default build/run; env ATOMFLASH_RUN_DIR)"
    timeout_help = "wall seconds a command may take before the drive counts as hung (exit 5; default 30)"
    top.add_argument("--dir", type=Path, default=None, help=dir_help)
    top.add_argument("--timeout", type=float, default=30.0, help=timeout_help)
    qid_help = "the host queue pair to use (0 .. host queues - 1; default 0)"
    top.add_argument("--qid", type=_nonneg, default=0, help=qid_help)
    board_help = ("a board instead of the simulation: its build's csr.csv (build/boards/<board>/csr.csv); "
                  "litex_server must own its serial port (docs/results/boards.md)")
    server_help = "litex_server's host:port for --board-csr (default 127.0.0.1:1234)"
    etherbone_help = ("with --board-csr: the board's Etherbone host link over UDP at IP[:PORT] instead of "
                      "litex_server (default port 1234)")
    from .device import SIM_LINKS

    link_help = ("the simulation's link the verbs use: nvme, debug (UARTBone) or etherbone (a simulation started "
                 "with sim start --ethernet); default nvme when it has a PCIe link, else debug")
    top.add_argument("--board-csr", type=Path, default=None, help=board_help)
    top.add_argument("--server", default="127.0.0.1:1234", help=server_help)
    top.add_argument("--etherbone", default=None, metavar="IP[:PORT]", help=etherbone_help)
    top.add_argument("--link", default=None, choices=SIM_LINKS, help=link_help)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=argparse.SUPPRESS, help=dir_help)
    common.add_argument("--timeout", type=float, default=argparse.SUPPRESS, help=timeout_help)
    common.add_argument("--qid", type=_nonneg, default=argparse.SUPPRESS, help=qid_help)
    common.add_argument("--board-csr", type=Path, default=argparse.SUPPRESS, help=board_help)
    common.add_argument("--server", default=argparse.SUPPRESS, help=server_help)
    common.add_argument("--etherbone", default=argparse.SUPPRESS, metavar="IP[:PORT]", help=etherbone_help)
    common.add_argument("--link", default=argparse.SUPPRESS, choices=SIM_LINKS, help=link_help)
    sub = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = sub.add_parser("sim", help="start, stop or inspect the simulated SSD", parents=[common])
    ss = p.add_subparsers(dest="sim_verb", required=True, metavar="start|stop|status|cut")
    q = ss.add_parser("start", help="build (cached) and boot the simulated SSD in the background", parents=[common])
    q.add_argument("--fresh", action="store_true", help="new NAND images (a factory-new device)")
    q.add_argument("--channels", type=_pos, default=2, help="NAND channels (a build per configuration)")
    q.add_argument("--ways", type=_pos, default=2, help="targets per channel")
    q.add_argument("--profile", default="small", choices=sorted(spec.NAND_PROFILES), help="NAND profile")
    q.add_argument("--blocks-per-lun", type=_nonneg, default=8,
                   help="erase blocks per LUN (0: the profile's; small devices boot and fill fast)")
    q.add_argument("--image", default=None, help="image path prefix: target i uses PREFIX<i>.img")
    q.add_argument("--cache-pages", type=_nonneg, default=spec.LIMITS.CACHE_PAGES,
                   help="the controller's volatile write cache, in pages (default %(default)s; 0: none; another size "
                        "is a build of its own; acknowledged writes are durable only after flush)")
    q.add_argument("--host-queues", type=_pos, default=2,
                   help="host queue pairs (Device qid 0..N-1; the firmware's own comes on top; another count is "
                        "a build of its own)")
    q.add_argument("--sdram", action="store_true",
                   help="main RAM and host memory in a simulated SDRAM behind LiteX's controller, as "
                        "on a board (a build of its own)")
    q.add_argument("--ethernet", action="store_true",
                   help="the Etherbone host link on a simulated Ethernet port, as on an Ethernet board: its UDP "
                        "gateway on 127.0.0.1, which --link etherbone uses (a build of its own)")
    q.add_argument("--nvme", action=argparse.BooleanOptionalAction, default=True,
                   help="the drive as an NVMe device on a simulated PCIe link, which the verbs use (the debug port "
                        "stays beside it: --qid N picks I/O queue N + 1; --no-nvme: the debug port only, a build of "
                        "its own)")
    q.add_argument("--nand-set", action="append", default=[], metavar="KEY=VALUE",
                   help="NAND model key for every target (atomflash.nandsim.CONFIG_KEYS), e.g. ber=1e-6 or "
                        "power_cut_ns=1000000 (a cut 1 ms into the boot: exit 4); power_cut_finish is 1 unless "
                        "set (a cut ends the simulation)")
    q.add_argument("-v", "--verbose", action="store_true", help="print the whole boot report")
    q = ss.add_parser("stop", help="end the simulation (cleanly, or as a power cut)", parents=[common])
    q.add_argument("--power-cut", action="store_true", help="kill it at once: a power cut at this instant")
    q = ss.add_parser("status", help="is it running, where, which flash", parents=[common])
    q.add_argument("--json", action="store_true")
    q = ss.add_parser("cut", help="arm a NAND power cut counted from now (a torn program or erase)", parents=[common])
    g = q.add_mutually_exclusive_group(required=True)
    g.add_argument("--program", type=_pos, help="during the K-th page program from now (on each target named)")
    g.add_argument("--erase", type=_pos, help="during the K-th block erase from now")
    g.add_argument("--kind", choices=[k.name.lower() for k in spec.Kind if k != spec.Kind.ERASED],
                   help="during the next program of a page of this OOB record kind (commit, remap, ...)")
    g.add_argument("--at-ns", type=_pos, help="NS nanoseconds of simulated time from now")
    q.add_argument("--target", type=_nonneg, action="append", default=[],
                   help="NAND target (repeatable; default: every target -- the first to count to K cuts)")
    q.add_argument("--progress", type=float, default=None,
                   help="how far the torn operation gets (0..1; default the model's, 0.5)")
    p.set_defaults(func=cmd_sim)

    p = sub.add_parser("identify", help="IDENTIFY: geometry and limits", parents=[common])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_identify)

    p = sub.add_parser("read", help="read blocks (hex head, CRC per block, or --out FILE)", parents=[common])
    p.add_argument("lba", type=_nonneg)
    p.add_argument("--count", type=_pos, default=1)
    p.add_argument("--out", help="write the raw blocks to this file")
    p.set_defaults(func=cmd_read)

    p = sub.add_parser("write", help="write blocks (each block commits on its own)", parents=[common])
    p.add_argument("lba", type=_nonneg)
    _data_opts(p)
    p.add_argument("--fua", action="store_true", help="complete only once durable")
    p.set_defaults(func=cmd_write)

    p = sub.add_parser("trim", help="unbind blocks (they read as zeros)", parents=[common])
    p.add_argument("lba", type=_nonneg)
    p.add_argument("--count", type=_pos, default=1)
    p.set_defaults(func=cmd_trim)

    p = sub.add_parser("flush", help="make every acknowledged write durable", parents=[common])
    p.set_defaults(func=cmd_flush)

    p = sub.add_parser("hint", help="application hint", parents=[common])
    p.add_argument("hint", choices=[h.name.lower() for h in Hint])
    p.set_defaults(func=cmd_hint)

    p = sub.add_parser("atomic", help="write one block to each LBA as one all-or-nothing group", parents=[common])
    p.add_argument("lbas", type=_nonneg, nargs="+", metavar="LBA")
    _data_opts(p, count=False)
    p.set_defaults(func=cmd_atomic)

    p = sub.add_parser("tx", help="transactions: write | read | commit | abort by tid", parents=[common])
    ts = p.add_subparsers(dest="tx_verb", required=True, metavar="write|read|commit|abort")
    q = ts.add_parser("write", help="stage blocks in transaction TID (opens it)", parents=[common])
    q.add_argument("tid", type=_pos)
    q.add_argument("lba", type=_nonneg)
    _data_opts(q)
    q.add_argument("--final", action="store_true", help="last write: commit with it (no commit record)")
    q.add_argument("--new", action="store_true",
                   help="this write opens TID: refused with TID_IN_USE (exit 38) if anyone has it open")
    q = ts.add_parser("read", help="read as transaction TID sees it", parents=[common])
    q.add_argument("tid", type=_pos)
    q.add_argument("lba", type=_nonneg)
    q.add_argument("--count", type=_pos, default=1)
    q.add_argument("--out", help="write the raw blocks to this file")
    q = ts.add_parser("commit", help="make TID's writes durable and visible, all or nothing", parents=[common])
    q.add_argument("tid", type=_pos)
    q = ts.add_parser("abort", help="drop TID's writes", parents=[common])
    q.add_argument("tid", type=_pos)
    p.set_defaults(func=cmd_tx)

    p = sub.add_parser("append", help="stage blocks bound to no LBA; prints the remap token", parents=[common])
    _data_opts(p)
    p.add_argument("--fua", action="store_true")
    p.set_defaults(func=cmd_append)

    p = sub.add_parser("remap", help="bind appends to LBAs, all triples at once", parents=[common])
    p.add_argument("triples", type=_triple, nargs="+", metavar="LBA:TOKEN:COUNT")
    p.set_defaults(func=cmd_remap)

    p = sub.add_parser("release", help="discard a staged append", parents=[common])
    p.add_argument("token", type=_int)
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("open", help="what is open on the device: transactions and live appends (GET_LOG OPEN)",
                       parents=[common])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_open)

    p = sub.add_parser("stats", help="the device's GET_LOG counters", parents=[common])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("console", help="the firmware console (interactive, or one COMMAND)", parents=[common])
    p.add_argument("command", nargs="*", help="run this console command and print its output")
    p.set_defaults(func=cmd_console)

    p = sub.add_parser("bench", help="a workload with figures in simulated time", parents=[common])
    p.add_argument("--pattern", choices=["rand", "seq"], default="rand")
    p.add_argument("--read-pct", type=_nonneg, default=0, help="percent of commands that read")
    p.add_argument("--qd", type=_pos, default=4, help="commands in flight")
    p.add_argument("--ops", type=_pos, default=100, help="commands (the run ends at --ops or --duration)")
    p.add_argument("--duration", type=float, default=0, help="wall seconds (0: no limit)")
    p.add_argument("--count", type=_pos, default=1, help="blocks per read/write")
    p.add_argument("--atomic", type=_nonneg, default=0, help="writes are atomic groups of this many blocks")
    p.add_argument("--tx", type=_nonneg, default=0, help="writes are transactions of this many blocks")
    p.add_argument("--zipf", type=float, default=0.0, help="Zipf skew of the LBAs (0: uniform)")
    p.add_argument("--span", type=_nonneg, default=0, help="LBAs the workload covers (0: the whole device)")
    p.add_argument("--seed", type=_int, default=1)
    p.add_argument("--json", action="store_true", help="results as JSON")
    p.add_argument("--progress", action="store_true", help="progress bar even when not on a terminal")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("sql", help="run SQL on a SQLite database kept on the drive (docs/sqlite.md)", parents=[common])
    p.add_argument("db", help="the database's file name on the drive")
    p.add_argument("sql", help="statements; result rows print as a|b|c")
    p.add_argument("--mode", choices=("atomic", "rollback", "wal"), default="atomic",
                   help="atomic: commits as one atomic group, no journal written (default); rollback; wal")
    p.set_defaults(func=cmd_sql)
    return top


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from .device import DeviceError, HostMemoryFull
    from .transport import TransportError

    verb = args.verb + (f" {getattr(args, 'sim_verb', '') or getattr(args, 'tx_verb', '') or ''}".rstrip())
    try:
        args.func(args)
        return 0
    except errors.AtomflashError as e:
        print(f"atomflash: {verb}: {e}", file=sys.stderr)
        return EXIT_STATUS_BASE + int(e.status)
    except CliError as e:
        print(f"atomflash: {verb}: {e}", file=sys.stderr)
        return e.code
    except errors.CommandTimeout as e:
        print(f"atomflash: {verb}: {e}", file=sys.stderr)
        return EXIT_TIMEOUT
    except (TransportError, DeviceError, TimeoutError) as e:
        print(f"atomflash: {verb}: {e}", file=sys.stderr)
        return EXIT_NO_DEVICE
    except (ValueError, HostMemoryFull, OSError) as e:
        print(f"atomflash: {verb}: {e}", file=sys.stderr)
        return EXIT_VALUE
    except KeyboardInterrupt:
        print(f"atomflash: {verb}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
