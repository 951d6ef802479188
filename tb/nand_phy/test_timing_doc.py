"""docs/nand_channel.md's timing table is the generated one."""

from pathlib import Path

from rtl.nand.timing import timing_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "nand_channel.md"


def test_doc_timing_table_is_current():
    text = DOC.read_text()
    table = text.split("<!-- timing-table -->\n", 1)[1].split("<!-- /timing-table -->", 1)[0]
    assert table == timing_markdown(), "regenerate the table: python -c 'from rtl.nand.timing import timing_markdown; print(timing_markdown())'"
