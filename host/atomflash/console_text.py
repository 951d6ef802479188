"""The firmware console's output as text, and one command's output in it.

The console is a terminal: a coloured prompt, and a line editor that keeps
the input line whole while the idle loop (GC, checkpoints, warnings) prints.
Such a message first erases the prompt and the partial line (``\\r\\e[K``),
takes lines of its own, and then the prompt and the partial line are drawn
again (firmware/console.c).  A reader therefore sees, for ``io verify``::

    atomflash> i<\\r\\e[K>warning: ftl: block 10: ...
    atomflash> io verify 5 895 40
    0 wrong: pass
    atomflash>

`append` renders such output the way the terminal shows it (colours gone,
erased lines gone); `command_output` finds a command's echo in it, after the
last redraw, and what it printed up to the next prompt.  The NAND models of a
simulation write their notes to the same terminal at any point, even inside
an echo: those are moved after the command's output.

Both readers of the console use these: ``soc.console.SimConsole`` (a pty)
and ``atomflash.simctl`` (a running simulation's console socket).
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
ERASE_LINE = "\x1b[K"   # the firmware sends it after "\r": the whole line goes
PROMPT = "atomflash> "
MODEL_NOTE = re.compile(r"nand\d+: [\d.]+ ns: \w+: [^\r\n]*\r?\n")


def _plain(raw: str) -> str:
    return ANSI.sub("", raw).replace("\r", "")


def append(text: str, raw: str) -> str:
    """``text`` followed by the terminal output ``raw``, as the terminal shows it."""
    first, *after_erases = raw.split(ERASE_LINE)
    text += _plain(first)
    for part in after_erases:
        text = text[:text.rfind("\n") + 1] + _plain(part)
    return text


def render(raw: str) -> str:
    """Terminal output as text (see `append`)."""
    return append("", raw)


def unfinished_escape(raw: str) -> int:
    """Where an escape sequence cut off by a read boundary starts in ``raw``, or -1.
    The UART sends a byte at a time, so reads split sequences; hold the tail back."""
    cut = raw.rfind("\x1b")
    if cut >= 0 and not ANSI.match(raw, cut) and len(raw) - cut < 16:
        return cut
    return -1


# what a reader that connects while the prompt is being printed may see of it: any tail (the last
# space alone did not match "> ": campaign trials 5704 and 5982 waited out their limits for it)
_PROMPT_TAILS = "|".join(re.escape(PROMPT[i:]) for i in range(len(PROMPT)))


def command_output(text: str, line: str) -> tuple[str, int] | None:
    """The output of the console command ``line`` in ``text``, which holds what the
    console showed since the command was typed, and where the prompt after it
    ends; None while that prompt has not come yet.

    Lines the idle loop printed before the echo come first in the output; the
    models' notes come last."""
    # the echo ends a line; before it on that line only a prompt, or the end of one (a reader that
    # connects while the prompt is being printed sees only its tail)
    echo = re.compile(r"(?:^|\n)(?:[^\n]*> |" + _PROMPT_TAILS + ")?" + re.escape(line) + r"\n")
    clean = MODEL_NOTE.sub("", text)
    m = echo.search(clean)
    if not m:
        return None
    prompt = clean.find(PROMPT, m.end())
    if prompt < 0:
        return None
    end = prompt + len(PROMPT)
    # the same place in `text`, which still holds the notes
    notes, removed = [], 0
    for n in MODEL_NOTE.finditer(text):
        if n.start() - removed >= end:
            break
        notes.append(n.group(0))
        removed += len(n.group(0))
    out = clean[:m.start()] + ("\n" if m.start() > 0 else "") + clean[m.end():prompt]
    if notes:
        out = out.rstrip("\n") + "\n" + "".join(notes)
    return out, end + removed
