"""One exception class per completion status (``atomflash.spec.Status``).

Generated from the spec, so a status added there gets its class here:
``Status.UNKNOWN_TX`` -> ``UnknownTx``, and every class derives from
:class:`AtomflashError`, whose message states the code, its name and its
meaning::

    try:
        dev.tx_commit(7)
    except atomflash.errors.UnknownTx as e:
        print(e)   # status 0x0a UNKNOWN_TX: no transaction with this tid is open (...)
"""

from __future__ import annotations

from .spec import Status

__all__ = ["AtomflashError", "error_class", "check", "BY_STATUS"]


class AtomflashError(Exception):
    """A command completed with a status other than SUCCESS."""

    status: Status

    def __init__(self, detail: str = ""):
        self.detail = detail
        text = f"status 0x{int(self.status):02x} {self.status.name}: {self.status.doc}"
        super().__init__(f"{text} ({detail})" if detail else text)


def _class_name(status: Status) -> str:
    return "".join(part.capitalize() for part in status.name.split("_"))


BY_STATUS: dict[Status, type[AtomflashError]] = {}
for _status in Status:
    if _status is Status.SUCCESS:
        continue
    _cls = type(_class_name(_status), (AtomflashError,),
                {"status": _status, "__doc__": f"Status {_status.name} (0x{int(_status):02x}): {_status.doc}.",
                 "__module__": __name__})
    globals()[_cls.__name__] = _cls
    BY_STATUS[_status] = _cls
    __all__.append(_cls.__name__)
del _status, _cls


def error_class(status: int) -> type[AtomflashError]:
    """The exception class of a (non-success) status code."""
    try:
        return BY_STATUS[Status(status)]
    except ValueError:
        raise ValueError(f"0x{status:02x} is not an atomflash status code") from None
    except KeyError:
        raise ValueError("SUCCESS has no exception class") from None


def check(status: int, detail: str = "") -> None:
    """Raise the status's exception unless it is SUCCESS."""
    if status != Status.SUCCESS:
        raise error_class(status)(detail)
