# atomflash entry points.  `make help` lists them.
# Every target that runs something depends on `deps`, so each works alone on a
# fresh machine.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BUILD := build
JOBS ?= 2
export CI

.DEFAULT_GOAL := help
.PHONY: help deps gen demo demo-log campaign campaign-mlc campaign-cache campaign-long soak test test-fast test-slow sim firmware bench-nand bench-ecc bench-channel bench-ftl bench-nvme bench-etherbone bench-soc bench-gc bench-sqlite crash-sqlite fuzz synth-channel bitstream board-report clean
SIM_ARGS ?=
BOARD ?= colorlight_i5
BOARD_ARGS ?=

help: ## list every target with what it does
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## install Debian packages and the pinned .venv (idempotent, ~1 s when present)
	@scripts/deps.sh

gen: deps ## generate the C header from atomflash.spec into build/gen/
	@$(PY) -m atomflash.gen_c $(BUILD)/gen/atomflash_spec.h
	@echo "wrote $(BUILD)/gen/atomflash_spec.h"

demo: deps ## the main job: a host drives the simulated SSD (SoC + firmware + FTL + NAND models), power is cut mid-workload, the firmware recovers, the model's oracle judges every LBA
	@$(PY) sim/demo.py $(DEMO_ARGS)

campaign: deps ## power-fault campaign on the full simulated system, judged by the model's oracle (CAMPAIGN_ARGS="--count 20 --jobs 2 --faults --report build/campaign/report.md"; resumable, build/campaign)
	@$(PY) -m sim.campaign $(CAMPAIGN_ARGS)

campaign-mlc: deps ## 200 power-fault trials on an MLC device (paired-page damage at every cut, bit errors, program and erase failures), 8 blocks per LUN -> docs/results/campaign_mlc.md (resumable; CAMPAIGN_ARGS="--count N")
	@$(PY) -m sim.campaign --dir build/campaign-mlc --count 200 --jobs 2 --faults bits,program,erase,mlc --blocks-per-lun 8 --commands 40 --cache-pages 0 --report docs/results/campaign_mlc.md --ledger docs/results/campaign_mlc.jsonl --pgo $(CAMPAIGN_ARGS)

campaign-cache: deps ## 200 power-fault trials with the core's write cache (spec.LIMITS.CACHE_PAGES pages), faults mixed in, 8 blocks per LUN: only writes never flushed may be lost, judged by the model with its cache -> docs/results/campaign_cache.md (resumable; CAMPAIGN_ARGS="--count N")
	@$(PY) -m sim.campaign --dir build/campaign-cache --count 200 --jobs 2 --faults mix --blocks-per-lun 8 --commands 40 --cache-pages --report docs/results/campaign_cache.md --ledger docs/results/campaign_cache.jsonl --pgo $(CAMPAIGN_ARGS)

campaign-long: deps ## the long power-fault campaign: 10,000 trials on both cores, faults mixed in, 8 blocks per LUN -> docs/results/campaign_long.md (resumable: run it again to go on)
	@$(PY) -m sim.campaign --dir build/campaign-long --count 10000 --jobs 2 --faults mix --blocks-per-lun 8 --commands 40 --cache-pages 0 --report docs/results/campaign_long.md --ledger docs/results/campaign_long.jsonl --pgo --draw-v1-below 6800 $(CAMPAIGN_ARGS)

soak: deps ## liveness soak: the mixed workload (ledger on queue 0, key-value store on queue 1, filler) on a drive kept at 50% and at 90% of its capacity, 10,000 commands each (20,000 in all), power cuts every few hundred, judged by the oracle; zero NO_SPACE below capacity -> docs/soak.md (resumable: build/soak; SOAK_ARGS="--fresh")
	@$(PY) sim/soak.py --levels 50,90 --ops 10000 --seed 1 --jobs 2 --report docs/soak.md $(SOAK_ARGS)

demo-log: deps ## the commit-flag log alone through the RTL NAND controller (no FTL, no SoC)
	@$(PY) sim/demo_log.py

test: deps ## the whole suite (cocotb on Verilator, C/Python spec identity), as CI runs it
	@$(PY) -m pytest -n $(JOBS) --dist loadgroup --durations=60 -m "not slow" tb

test-slow: deps ## the long tests excluded from make test (long scoreboarded FTL runs, model cut sweeps)
	@$(PY) -m pytest -n $(JOBS) --dist loadgroup -m slow tb

test-fast: deps ## the suite without Verilator builds (spec and model unit tests)
	@$(PY) -m pytest -q -m "not slow" tb/spec tb/model

sim: deps ## build (cached) and run the full SoC in Verilator, firmware console on this terminal (SIM_ARGS="--sys-clk-freq 60e6 --trace ...")
	@$(PY) soc/sim.py $(SIM_ARGS)

firmware: deps ## build the SoC headers and the firmware (build/soc/sim/software/firmware/firmware.bin)
	@$(PY) soc/sim.py --firmware-only -q $(SIM_ARGS)

bench-nand: deps ## NAND model throughput (simulated cycles per wall second) -> docs/results/nand_model_bench.md
	@$(PY) sim/nand_model/bench.py

bench-ecc: deps ## BCH decoder latency/throughput in simulated cycles + ECP5 resources -> docs/results/ecc_bench.md
	@$(PY) sim/bench_ecc.py

bench-channel: deps ## NAND channel bus efficiency per mode and program throughput over ways/channels -> docs/results/nand_channel_bench.md
	@$(PY) sim/bench_channel.py

bench-ftl: deps ## FTL core: 4 KiB random writes at QD 16 and atomic groups vs the NAND limit, map-cache hit rate, read latency -> docs/results/ftl_bench.md
	@$(PY) sim/bench_ftl.py

bench-nvme: deps ## NVMe drive under simulated PCIe: host-visible 4 KiB random write/read throughput at QD 1/8/32 over 1 and 4 queues vs the same core alone, bench-ftl and the NAND limit, per-command overhead -> docs/results/nvme_bench.md (BENCH_ARGS="--write-commands 512")
	@$(PY) sim/bench_nvme.py $(BENCH_ARGS)

bench-etherbone: deps ## the simulated SSD's Ethernet host link (LiteEth + Etherbone, UDP gateway): host-memory write/read throughput at window 1 and the host's window vs the wire limit, the drive through it -> docs/results/etherbone_bench.md (BENCH_ARGS="--ops 400")
	@$(PY) sim/bench_etherbone.py $(BENCH_ARGS)

bench-soc: deps ## full SoC: boot time vs pages since the checkpoint and vs device size, GC write amplification vs over-provisioning (100% fill included), simulation speed -> docs/results/soc_bench.md (~1 h)
	@$(PY) sim/bench_soc.py $(BENCH_ARGS)

bench-gc: deps ## GC write amplification at scale: the firmware's victim policies (greedy, cost-benefit) built for the host on 1,024 blocks, WA vs over-provisioning against the analytic greedy curve, hot/cold separation on skewed writes, a cross-check on the full SoC (greedy, one point) -> docs/results/gc_bench.md (~10 min; BENCH_ARGS="--no-soc" ~1 min, "--soc-policies greedy,cost-benefit" ~10 min more)
	@$(PY) sim/bench_gc.py $(BENCH_ARGS)

bench-sqlite: deps ## real SQLite (APSW, batch atomic writes) on atomflash: the X-FTL experiment, rollback / WAL / atomic, full table on the reference model + reduced on the simulated SoC -> docs/sqlite.md, docs/results/sqlite_bench.json and plots (BENCH_ARGS="--no-soc ...")
	@$(PY) -m atomflash.sqlbench bench $(BENCH_ARGS)

crash-sqlite: deps ## power cuts at random points of the SQLite workload in every mode (300 on the model, 6 on the simulated SoC), each judged by SQLite after the restart -> docs/sqlite.md, docs/results/sqlite_crash.json (CRASH_ARGS="--cuts 100 --soc-cuts 2")
	@$(PY) -m atomflash.sqlbench crash $(CRASH_ARGS)

fuzz: deps ## property-based fuzzing of the NVMe command interface on the simulated drive, the reference model as oracle: 100,000 random and broken commands (Hypothesis, shrunk on failure), every status, read and block compared, a simulated-time deadline per command -> docs/results/fuzz.md (a simulated drive per core; resumable: build/fuzz; FUZZ_ARGS="--commands 2000 --fresh")
	@$(PY) -m sim.fuzz $(FUZZ_ARGS)

synth-channel: deps ## Yosys synth_ecp5 of one NAND channel (PHY + sequencer + ECC) -> docs/results/nand_channel_synth.md
	@$(PY) -m rtl.nand.synth

bitstream: deps ## bitstream for an ECP5 board with open tools: BOARD=colorlight_i5|ulx3s [BOARD_ARGS="--sys-clk-freq 60e6 --channels 2 --ways 2"] -> build/boards/
	@$(PY) boards/$(BOARD).py --build $(BOARD_ARGS)

board-report: deps ## board bitstreams + controller core alone: resources, Fmax, timing margins -> docs/results/boards.md (~1 h on 2 cores)
	@$(PY) boards/report.py $(REPORT_ARGS)

clean: ## remove build outputs (keeps .venv)
	rm -rf $(BUILD)
