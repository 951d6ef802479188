# Repository-root conftest: makes `tb.common` importable from every test, and orders `make test`.
#
# Scheduling (`make test`: pytest-xdist, `--dist loadgroup`, two workers).  xdist hands out work units
# (an xdist_group, or one test) biggest group first, so both workers would start on SoC tests and
# wait for the SoC simulation's build (about four minutes, most of it on one core).  Instead:
#
# * the controller starts that build in the background as the run begins (`soc/sim.py --build-only`;
#   a worker's own call then waits for it under the build's lock, or finds it done);
# * the workers take units in collection order, which `pytest_collection_modifyitems` sorts: first
#   the tests marked `long` that need no SoC (their own Verilator builds), then the SoC tests (marked
#   `soc`), long ones first, then the short tests, which fill the tail while the other worker finishes.
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

SOC_BUILD_LOG = ROOT / "build" / "soc" / "background-build.log"


def _phase(item) -> tuple[int, int]:
    soc = item.get_closest_marker("soc") is not None
    long = item.get_closest_marker("long") is not None
    if soc:
        return (1, 0 if long else 1)
    return (0, 0) if long else (2, 0)


def pytest_collection_modifyitems(config, items):
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (*_phase(item), order[id(item)]))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class CollectionOrderScheduling(LoadGroupScheduling):
        """LoadGroupScheduling with units handed out in collection order (a group where its first test
        is), and the SoC build started in the background when any SoC test is collected."""

        _ordered = False

        def _assign_work_unit(self, node):
            if not self._ordered:
                self._ordered = True
                first = {}
                for i, nodeid in enumerate(self.collection):
                    first.setdefault(self._split_scope(nodeid), i)
                units = sorted(self.workqueue.items(), key=lambda kv: first[kv[0]])
                self.workqueue.clear()
                self.workqueue.update(units)
                if any(n.startswith(("tb/soc/", "tb/campaign/", "tb/host/test_cli_sim")) for n in self.collection):
                    SOC_BUILD_LOG.parent.mkdir(parents=True, exist_ok=True)
                    with open(SOC_BUILD_LOG, "w") as log_file:
                        subprocess.Popen([sys.executable, str(ROOT / "soc" / "sim.py"), "--build-only", "-q"],
                                         cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log_file,
                                         stderr=subprocess.STDOUT)
            super()._assign_work_unit(node)

    return CollectionOrderScheduling(config, log)
