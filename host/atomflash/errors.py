"""Every exception the host library raises, all derived from :class:`Error`.

One class per completion status (``atomflash.spec.Status``), generated from
the spec, so a status added there gets its class here: ``Status.UNKNOWN_TX``
-> ``UnknownTx``; every one derives from :class:`AtomflashError`, whose
message states the code, its name and its meaning::

    try:
        dev.tx_commit(7)
    except atomflash.errors.UnknownTx as e:
        print(e)   # status 0x0a UNKNOWN_TX: no transaction with this tid is open (...)

A command the library refuses before it reaches the device (a value that
does not fit its field, such as LBA -1) raises the class of the status the
device gives that mistake (``LbaOutOfRange``), with ``submitted`` False.

Below the command level:

==========================  =====================================================
:class:`DeviceError`        the device misbehaved below the command level (no queue, a register not there)
:class:`BadQueue`           the queue pair asked for is not one of the device's host queues
:class:`HostMemoryFull`     a command needs more host memory than its queue's slice holds
:class:`InvalidArgument`    an argument the library cannot turn into a command (data not whole blocks, ...)
:class:`TransportError`     the link to the device failed: refused, closed (the device lost power) or silent
:class:`CommandTimeout`     a command did not complete within its timeout (the drive hung)
:class:`ReadyTimeout`       the host interface did not come up in time (the boot did not finish)
==========================  =====================================================

The classes below the command level also derive from the built-in class a
caller would expect (``TransportError`` from ``ConnectionError``,
``CommandTimeout`` from ``TimeoutError``, ``HostMemoryFull`` and
``InvalidArgument`` from ``ValueError``, ``DeviceError`` from
``RuntimeError``).
"""

from __future__ import annotations

from .spec import Status

__all__ = ["Error", "AtomflashError", "DeviceError", "BadQueue", "HostMemoryFull", "InvalidArgument",
           "TransportError", "CommandTimeout", "ReadyTimeout", "error_class", "check", "BY_STATUS"]


class Error(Exception):
    """Base of every exception the atomflash host library raises."""


class AtomflashError(Error):
    """A command completed with a status other than SUCCESS (``submitted``
    False: the library refused it with that status before sending it)."""

    status: Status

    def __init__(self, detail: str = "", *, submitted: bool = True):
        self.detail = detail
        self.submitted = submitted
        text = f"status 0x{int(self.status):02x} {self.status.name}: {self.status.doc}"
        super().__init__(f"{text} ({detail})" if detail else text)


class DeviceError(Error, RuntimeError):
    """The device misbehaved below the command level (no queue, a register that is not there)."""


class BadQueue(DeviceError):
    """The queue pair asked for is not one of the device's host queues."""


class HostMemoryFull(Error, ValueError):
    """A command needs more host memory than its queue's slice holds even with nothing in flight."""


class InvalidArgument(Error, ValueError):
    """An argument the library cannot turn into a command (data that is not whole blocks, a bad qid)."""


class TransportError(Error, ConnectionError):
    """The link to the device failed: refused, closed (the simulation ended or lost power) or silent."""


class CommandTimeout(Error, TimeoutError):
    """A command did not complete within its timeout: the drive is hung (or far slower than
    expected).  ``command``: the oldest one overdue; it stays in flight (the device may still
    complete it, into buffers the library therefore keeps)."""

    def __init__(self, message: str, command=None):
        super().__init__(message)
        self.command = command


class ReadyTimeout(Error, TimeoutError):
    """The host interface did not come up within the wait (recovery still running, or the boot stopped)."""


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
