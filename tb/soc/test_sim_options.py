"""soc/sim.py's options that need no build: --pgo's refusals and its build directory of its own.

The profile-guided build itself (an instrumented model, a training run, the final model: ~7 minutes)
is not in `make test`; `make campaign-long` builds it, and docs/firmware.md has its measurements."""

import pytest

from soc import sim as socsim


@pytest.mark.parametrize("other", ["--no-nand", "--trace", "--trace-fst"])
def test_pgo_refuses_a_model_its_training_cannot_run_or_that_traces(other, capsys):
    with pytest.raises(SystemExit) as e:
        socsim.parse_args(["--pgo", other])
    assert e.value.code == 2
    assert "--pgo: a model with the NAND path and without tracing" in capsys.readouterr().err


def test_a_pgo_model_builds_in_a_directory_of_its_own():
    plain, pgo = socsim.parse_args([]), socsim.parse_args(["--pgo"])
    assert socsim.config_build_dir(plain) == socsim.DEFAULT_BUILD_DIR
    assert socsim.config_build_dir(pgo) not in (socsim.DEFAULT_BUILD_DIR,
                                               socsim.config_build_dir(socsim.parse_args(["--threads", "2"])))


def test_the_campaign_and_simctl_ask_for_it():
    from atomflash import simctl

    assert "--pgo" in simctl.SimConfig(pgo=True).build_args()
    assert "--pgo" not in simctl.SimConfig().build_args()
