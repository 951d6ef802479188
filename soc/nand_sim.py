"""Simulation wiring of the NAND model (``sim/nand_model``) into the SoC.

One ``nand_model`` instance per target (channel x way), clocked by ``sys``.
Each instance reads ``+nand<INDEX>_config=<file>`` / ``+nand<INDEX>_set=...``
plusargs at start (``atomflash.nandsim.plusargs``).  ``soc/sim.py`` writes one
config file per target into the run directory (``atomflash.nandsim.write_configs``:
the build's profile, the model clock = the SoC clock, image ``nand<INDEX>.img``
next to it) unless the caller names its own, so the images persist across
runs and a restart is a power cycle.

Pins: the model wants split DQ (``dq_i`` from the host, ``dq_o``/``dq_oe`` from
the target).  :func:`wire_core` connects the controller's ``nand__<c>__*``
ports to the models: per channel the strobes and DQ out are shared, CE# and
R/B# are per target, and the targets' DQ outputs are OR-ed, each gated by its
``dq_oe`` (one target drives at a time).

DQ latency: the model samples the pins on the clock edge after the bridge
drives them and registers its outputs; the bridge registers ``dq_i`` once more.
:data:`SAMPLE_CYCLES` is the resulting ``tSAMPLE`` (the NAND channel test
harness, without the bridge's register, uses 2).
"""

from __future__ import annotations

from pathlib import Path

from migen import ClockSignal, If, Instance, Mux, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / "sim" / "nand_model"

#: tSAMPLE of the simulated SoC: model input edge (+1), model output register (+1), bridge dq_i register (+1).
SAMPLE_CYCLES = 3

PINS_IN = ("ce_n", "cle", "ale", "we_n", "re_n", "wp_n", "dq_i")   # model inputs (host drives)
PINS_OUT = ("dq_o", "dq_oe", "rb_n")                             # model outputs


class NandModelControl(LiteXModule):
    """The NAND models' control port on the SoC bus (simulation only): what
    cocotb does through the models' public ``ctl_*`` registers, a host does
    through these CSRs (``atomflash.simctl.NandControl``), e.g. schedule a
    power cut at the k-th program *from now*, or at a simulated instant.

    Write ``op`` (``atomflash.nandsim.NandCtl``) and ``arg0..2``, then
    ``control`` (the models' mask and ``go``): those models run the operation on their next
    clock edge; ``status.done`` rises when every one has, and ``result``
    holds the answer of the lowest-numbered one.  ``cycle`` is the clock count
    the models share (their time is ``cycle`` x the clock period)."""

    def __init__(self, count: int):
        self.ports = [dict(strobe=Signal(), ack=Signal(), result=Signal(64)) for _ in range(count)]
        self.op = CSRStorage(32, description="NandCtl operation")
        self.arg0 = CSRStorage(64, description="first argument")
        self.arg1 = CSRStorage(64, description="second argument")
        self.arg2 = CSRStorage(64, description="third argument")
        self.control = CSRStorage(fields=[
            CSRField("targets", size=count, description="the models to run ``op`` (bit i: target i)"),
            CSRField("go", size=1, offset=31, pulse=True, description="write 1: run it"),
        ])
        self.status = CSRStatus(fields=[CSRField("done", size=1, description="every model named has answered")])
        self.result = CSRStatus(64, description="the answer of the lowest-numbered model named")
        self.cycle = CSRStatus(64, description="clock edges since power-on (the models' time base)")

        # # #

        cycle = Signal(64)
        self.sync += cycle.eq(cycle + 1)
        self.comb += self.cycle.status.eq(cycle)
        targets = self.control.fields.targets
        pending = [p["strobe"] ^ p["ack"] for p in self.ports]
        self.comb += self.status.fields.done.eq(~_any([targets[i] & pending[i] for i in range(count)]))
        for i, p in enumerate(self.ports):
            self.sync += If(self.control.fields.go & targets[i], p["strobe"].eq(~p["strobe"]))
        result = self.ports[-1]["result"]
        for i in reversed(range(count - 1)):
            result = Mux(targets[i], self.ports[i]["result"], result)
        self.comb += self.result.status.eq(result)


def _any(bits):
    acc = bits[0]
    for b in bits[1:]:
        acc = acc | b
    return acc


def add_nand_models(soc, *, channels: int, ways: int, gen_dir: Path):
    """Instantiate channels x ways NAND models in ``soc`` and register their
    sources/flags with the simulation build (``soc.sim_*``, see soc/sim.py).
    ``soc.nand_pins[c * ways + w]`` holds each model's pins (migen signals)."""
    from atomflash import nandsim  # the model's generated C++ header

    header = nandsim.write_header(gen_dir)
    # generated, not compiled on its own: soc/sim.py hashes it with the sources
    soc.sim_hash_extra = [*getattr(soc, "sim_hash_extra", []), Path(header), Path(header).parent / "atomflash_spec.h"]
    soc.platform.add_source(str(MODEL_DIR / "nand_model.sv"))
    soc.sim_sources.append(MODEL_DIR / "nand_model.cpp")
    soc.sim_cflags.append(f"-I{gen_dir} -I{MODEL_DIR}")

    soc.nand_pins = []
    soc.nandctl = NandModelControl(channels * ways)
    for ch in range(channels):
        for way in range(ways):
            index = ch * ways + way
            pins = dict(
                ce_n=Signal(reset=1), cle=Signal(), ale=Signal(), we_n=Signal(reset=1),
                re_n=Signal(reset=1), wp_n=Signal(reset=1), dq_i=Signal(8),
                dq_o=Signal(8), dq_oe=Signal(), rb_n=Signal(),
            )
            soc.nand_pins.append(pins)
            soc.specials += Instance(
                "nand_model", name=f"nand{index}", p_INDEX=index,
                i_clk=ClockSignal("sys"),
                i_ext_ctl_strobe=soc.nandctl.ports[index]["strobe"], i_ext_ctl_op=soc.nandctl.op.storage,
                i_ext_ctl_arg0=soc.nandctl.arg0.storage, i_ext_ctl_arg1=soc.nandctl.arg1.storage,
                i_ext_ctl_arg2=soc.nandctl.arg2.storage, o_ext_ctl_ack=soc.nandctl.ports[index]["ack"],
                o_ext_ctl_result=soc.nandctl.ports[index]["result"],
                i_dqs_i=0, i_dqs_i_oe=0, o_dqs_o=Signal(), o_dqs_oe=Signal(),   # the SDR channel has no DQS
                **{("o_" if k in PINS_OUT else "i_") + k: v for k, v in pins.items()})


def wire_core(soc, core, *, channels: int, ways: int):
    """Connect the NAND bridge's ``nand__<c>__*`` ports (``core.params``) to the
    models of :func:`add_nand_models`."""
    from migen import Cat

    p = core.params
    for c in range(channels):
        pre = f"nand__{c}__"
        models = soc.nand_pins[c * ways:(c + 1) * ways]
        ce_n, rb_n = Signal(ways, reset=(1 << ways) - 1), Signal(ways)
        shared = {name: Signal(len(models[0][name])) for name in ("cle", "ale", "we_n", "re_n", "wp_n")}
        dq_o, dq_oe, dq_i = Signal(8), Signal(), Signal(8)
        p[f"o_{pre}ce_n"] = ce_n
        p[f"i_{pre}rb_n"] = rb_n
        for name, sig in shared.items():
            p[f"o_{pre}{name}"] = sig
        p[f"o_{pre}dq_o"] = dq_o
        p[f"o_{pre}dq_oe"] = dq_oe
        p[f"i_{pre}dq_i"] = dq_i
        terms = []
        for w, m in enumerate(models):
            soc.comb += [m["ce_n"].eq(ce_n[w]), m["dq_i"].eq(dq_o)]
            soc.comb += [m[name].eq(sig) for name, sig in shared.items()]
            terms.append(m["dq_o"] & Cat(*([m["dq_oe"]] * 8)))
        soc.comb += rb_n.eq(Cat(*[m["rb_n"] for m in models]))
        soc.comb += dq_i.eq(_any(terms))
    # dq_oe of the bridge is not needed by the models (they see dq_i whether or not it is driven)
    for led in ("led_activity", "led_fault"):  # the board bridge's LEDs: nothing to light in simulation
        if led in core.port_names:
            p.setdefault(f"o_{led}", Signal())
