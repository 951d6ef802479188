"""The FTL core against four NAND models in Verilator: the cocotb tests, split by feature into
``cocotb_*.py`` here (:data:`MODULES`), with their shared TB helpers in ``ftl_core_tb.py``.

Each pytest item hands cocotb every module (``MODULE``, a comma-separated list) and picks its tests
by name (``TESTCASE``); the items without the write cache share one Verilator build.

``test_ftl_core_verbs`` and ``test_ftl_core_random_and_cuts`` are in ``make test`` at the cocotb
tests' own sizes (8 scoreboard batches, 3 rounds of program failures under load); ``make test-slow`` adds ``test_ftl_core_write_cache`` (a build with the write cache, a
build option) and ``test_ftl_core_long``: the scoreboarded random workload for thousands of commands,
more power cuts, twelve rounds of program failures under load."""

import ast
from pathlib import Path

import pytest

from sim.harness import runner
from sim.harness.ftl_core import build
from sim.harness.nand_channel import model_plusargs

HERE = Path(__file__).resolve().parent

CHANNELS, WAYS, SLOTS = 2, 2, 8


CACHE_PAGES = 16       # the write-cache build: four stripes of 2 x 2 pages

# the cocotb modules.  cocotb runs the chosen tests in the order they were defined: module by module in
# this order (the order it imports them), each in file order -- the order of the one module they were
# split from
MODULES = ("cocotb_verbs",          # every_verb
           "cocotb_scoreboard",     # random_scoreboard
           "cocotb_failures",       # program_failures_are_retried, no_page_completes_no_space,
                                    # program_failures_under_load
           "cocotb_power_cut",      # power_cut_0, power_cut_1, power_cut_2
           "cocotb_gc",             # gc_relocation
           "cocotb_transactions",   # transactions
           "cocotb_appends",        # completions_hold_while_posted, appends_and_remaps
           "cocotb_write_cache",    # write_cache (the write-cache build only)
           "cocotb_mlc",            # mlc_paired_pages
           "cocotb_reads")          # reads_in_flight


def cocotb_tests(module):
    """The names of the ``@cocotb.test()`` coroutines in ``module`` (read, not imported)."""
    tree = ast.parse((HERE / f"{module}.py").read_text())
    return [f.name for f in tree.body if isinstance(f, ast.AsyncFunctionDef)
            and any(getattr(d, "func", d).attr == "test" for d in f.decorator_list
                    if hasattr(getattr(d, "func", d), "attr"))]


def _run(tmp_path, testcase=None, cache_pages=0, **env):
    # two read slots per channel (one per way): the reader keeps a read in flight on every die
    args = build("small", CHANNELS, WAYS, SLOTS, nand_slots=6, read_slots=2, cache_pages=cache_pages, test_dir=HERE)
    slot_words = args.pop("slot_words")
    runner.run(test_module=",".join(MODULES), plusargs=model_plusargs(tmp_path, "small", CHANNELS * WAYS),
               extra_env={"NANDTB_SLOT_WORDS": str(slot_words), "FTL_SLOTS": str(SLOTS),
                          "FTL_CACHE_PAGES": str(cache_pages), **env},
               testcase=testcase, **args)


@pytest.mark.long
def test_ftl_core_verbs(tmp_path):
    _run(tmp_path, testcase=["every_verb", "transactions", "appends_and_remaps", "completions_hold_while_posted",
                             "program_failures_are_retried",
                             "program_failures_under_load", "gc_relocation", "mlc_paired_pages", "reads_in_flight"])


@pytest.mark.long
def test_ftl_core_random_and_cuts(tmp_path):
    # a second item, so the two halves run on both workers (they share the Verilator build)
    _run(tmp_path, testcase=["random_scoreboard", "power_cut_0", "power_cut_1", "power_cut_2",
                             "no_page_completes_no_space"])


@pytest.mark.slow      # a Verilator build of its own, ~7 min: make test-slow: the write cache is a build option (cache_pages)
def test_ftl_core_write_cache(tmp_path):
    # a build of its own (cache_pages > 0; the other tests keep the cache-less one): the directed test, then
    # the random scoreboard and a power cut with plain writes buffered
    _run(tmp_path, testcase=["write_cache", "random_scoreboard", "power_cut_0"], cache_pages=CACHE_PAGES)


def test_every_cocotb_test_is_run():
    # every cocotb module here is in MODULES, and every test lives in exactly one of them
    assert sorted(MODULES) == sorted(p.stem for p in HERE.glob("cocotb_*.py")), MODULES
    found = [t for m in MODULES for t in cocotb_tests(m)]
    assert len(found) == len(set(found)), f"a test in two modules: {found}"
    tests = set(found)
    assert tests == {"every_verb", "transactions", "appends_and_remaps", "completions_hold_while_posted",
                     "program_failures_are_retried",
                     "program_failures_under_load", "gc_relocation", "random_scoreboard", "power_cut_0",
                     "power_cut_1", "power_cut_2", "write_cache", "mlc_paired_pages",
                     "no_page_completes_no_space", "reads_in_flight"}, tests


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_ftl_core_long(tmp_path, seed):
    # ~1,500 commands (and as many reads) per seed, then three more power cuts, and twelve rounds of
    # program failures under load
    _run(tmp_path, testcase=["random_scoreboard", "power_cut_0", "power_cut_1", "power_cut_2",
                             "program_failures_under_load"],
         FTL_SEED=str(seed), FTL_BATCHES="300", FTL_BLOCKS="63", FTL_ROUNDS="12")
