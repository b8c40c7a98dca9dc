from __future__ import annotations

from pathlib import Path

from bench.report import DOCS_INTRO, write_docs

PAGE = Path(__file__).parents[2] / "docs" / "performance.md"


def test_a_bench_run_keeps_every_hand_written_section_of_the_page(tmp_path: Path) -> None:
    hand = (
        "## Decisions without a fleet\n\n| benchmark |\n\n"
        "## Sizing\n\n```sh\n## not a heading: inside a code block\n```\n\n"
        "## Analysis\n\nwritten by hand\n\n"
    )
    page = tmp_path / "performance.md"
    page.write_text(DOCS_INTRO + hand + "## Latest results — old\n\nold figures\n")
    write_docs(page, "## jobrelay benchmark — new\n\nnew figures\n")
    assert page.read_text() == DOCS_INTRO + hand + "## Latest results — new\n\nnew figures\n"


def test_rewriting_the_real_page_loses_nothing_but_the_latest_results(tmp_path: Path) -> None:
    text = PAGE.read_text()
    assert text.startswith(DOCS_INTRO), (
        "docs/performance.md's intro is bench/report.py's DOCS_INTRO"
    )
    copy = tmp_path / "performance.md"
    copy.write_text(text)
    write_docs(copy, "## jobrelay benchmark — new\n\nnew figures\n")
    before = text[: text.index("## Latest results")]
    assert copy.read_text() == before + "## Latest results — new\n\nnew figures\n"
