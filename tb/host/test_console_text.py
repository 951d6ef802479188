"""atomflash.console_text: the console's terminal output as text, and one
command's output found in it (the readers of soc.console and atomflash.simctl)."""

from __future__ import annotations

import pytest

from atomflash.console_text import PROMPT, append, command_output, render, unfinished_escape

COLOUR_PROMPT = "\x1b[92;1matomflash\x1b[0m> "
ERASE = "\r\x1b[K"


def test_render_strips_colours_and_carriage_returns():
    assert render(COLOUR_PROMPT + "info\n\r") == PROMPT + "info\n"


def test_an_erase_takes_the_whole_line_being_written():
    raw = COLOUR_PROMPT + "inf" + ERASE + "gc: victim 3\n\r" + COLOUR_PROMPT + "inf"
    assert render(raw) == "gc: victim 3\n" + PROMPT + "inf"
    # earlier lines stay; an erase split from what came before it by a read boundary works the same
    text = append("boot\n" + PROMPT + "in", "f")
    assert append(text, ERASE + "warning: x\n") == "boot\nwarning: x\n"


def test_unfinished_escape_is_held_back():
    assert unfinished_escape("abc\x1b[92") == 3
    assert unfinished_escape("abc\x1b[92m") == -1
    assert unfinished_escape("abc") == -1


def test_output_of_a_command_typed_while_the_idle_loop_printed():
    raw = ("i" + ERASE + "warning: ftl: block 10: retired\n\r" + COLOUR_PROMPT + "i"
           + "o verify 5 895 40\n\r0 wrong: pass\n\r" + COLOUR_PROMPT + "next")
    text = render(raw)
    out, end = command_output(text, "io verify 5 895 40")
    assert out == "warning: ftl: block 10: retired\n0 wrong: pass\n"
    assert text[end:] == "next"


def test_model_notes_inside_the_echo_move_after_the_output():
    text = render("io ver" + "nand0: 12.5 ns: cut: power\n" + "ify 5 895 40\n0 wrong: pass\n" + PROMPT + "x")
    out, end = command_output(text, "io verify 5 895 40")
    assert out == "0 wrong: pass\nnand0: 12.5 ns: cut: power\n"
    assert text[end:] == "x"


def test_a_reader_that_connected_while_the_prompt_was_printed():
    text = render("[92;1matomflash\x1b[0m> ckpt every 16\r\n\rautomatic checkpoints every 16\r\n\r" + COLOUR_PROMPT)
    out, end = command_output(text, "ckpt every 16")
    assert out == "automatic checkpoints every 16\n" and text[end:] == ""


def test_every_cut_of_the_prompt_before_the_echo():
    """A reader sees the stream from whenever it connected: any tail of the prompt may start it."""
    raw = "boot: 861199 cycles. Type 'help'.\r\n\r" + COLOUR_PROMPT + "ckpt every 16\r\n\rautomatic checkpoints\r\n\r" + COLOUR_PROMPT
    start = raw.index("Type")
    for cut in range(start, raw.index("ckpt every") + 1):
        text = render(raw[cut:])
        got = command_output(text, "ckpt every 16")
        assert got is not None, repr(raw[cut:cut + 20])
        assert got[0] == "automatic checkpoints\n" or got[0].endswith("\nautomatic checkpoints\n"), (cut, got)


@pytest.mark.parametrize("text", [
    "io verify 5 895 40\n0 wrong",                    # no prompt yet
    "io verify 5 89",                                 # still being echoed
    PROMPT + "io verify 5 89\n" + PROMPT,             # another line ran (Ctrl-C'd, or a different one)
])
def test_no_output_until_the_echo_and_the_prompt_after_it(text):
    assert command_output(text, "io verify 5 895 40") is None
