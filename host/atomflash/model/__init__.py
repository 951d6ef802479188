"""atomflash.model: the reference model of the FTL's semantics -- the oracle
RTL scoreboards, firmware recovery and the power-fault campaign are judged by.

* :mod:`.semantics` -- :class:`Model`, every verb's host-visible behaviour and status codes;
* :mod:`.recover` -- :func:`recover`, the map that must survive, from the pages on flash;
* :mod:`.oracle` -- :func:`check_after_cut`, every broken promise after a power cut;
* :mod:`.logftl` -- :class:`LogFTL`, a reference log writer on abstract flash with
  GC, checkpoints and cut/tear injection, to exercise ``recover``;
* :mod:`.nvme` -- :class:`NvmeController`, the reference NVMe controller on the model (docs/nvme.md).

docs/model.md states the rules.
"""

from .logftl import Cut, Flash, LogFTL
from .nvme import NvmeController
from .oracle import Violation, check_after_cut
from .recover import Binding, Checkpoint, Page, PendingTx, Recovered, newest_checkpoint, recover
from .semantics import Completion, Limits, Model, Op, precedes

__all__ = ["Model", "Limits", "Op", "Completion", "precedes", "recover", "Page", "Checkpoint", "PendingTx",
           "Binding", "Recovered", "newest_checkpoint", "check_after_cut", "Violation", "LogFTL", "Flash", "Cut",
           "NvmeController"]
