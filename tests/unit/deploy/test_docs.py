"""The README and docs/ hold together: the README opens with the two commands, shows the
picture of the flow, and every relative link in README.md and docs/*.md reaches a file
(and a heading, where it names one)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Pages and headings other parts of issue 22 write, merged beside this one: tolerated only
# while they do not exist (once they do, they are checked like any other).
_LINK = re.compile(r"!?\[(?:[^\]]|\][^(])*?\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _FENCE.sub("", text).splitlines():
        if match := re.match(r"^#{1,6}\s+(.*?)\s*#*$", line):
            base = slug(match[1])
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[str]:
    """The link targets of a Markdown text, outside code."""
    prose = _CODE.sub("", _FENCE.sub("", text))
    return [target for target in _LINK.findall(prose)]


def test_slug_and_links_read_markdown_as_github_does() -> None:
    assert slug("Every setting of `jobrelay run`") == "every-setting-of-jobrelay-run"
    assert slug("A worker shows `Connected=False`") == "a-worker-shows-connectedfalse"
    assert (
        slug("Where a workload goes, and why it waits") == "where-a-workload-goes-and-why-it-waits"
    )
    assert anchors("# A\n## B\n```\n# not\n```\n## B\n") == {"a", "b", "b-1"}
    text = "[x](a.md#b) ![pic](docs/p.svg) `[no](c.md)`\n```\n[no](d.md)\n```\n[w](https://e)"
    assert links(text) == ["a.md#b", "docs/p.svg", "https://e"]


@pytest.mark.parametrize("page", DOCS, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_heading(page: Path) -> None:
    broken = []
    for target in links(page.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        name = str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else target
        if not resolved.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {name}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_the_readme_opens_with_the_two_commands() -> None:
    """The project's rule: the title, at most one sentence, then `make demo` and `make test`."""
    text = (ROOT / "README.md").read_text()
    before, fence, rest = text.partition("```sh\n")
    assert fence, "the README has no sh code block"
    lines = [line for line in before.splitlines() if line.strip()]
    assert lines[0] == "# jobrelay"
    assert len(lines) <= 2 and all(line.count(". ") == 0 for line in lines[1:])
    block = rest.partition("```")[0].splitlines()
    assert [line.split("#")[0].strip() for line in block] == ["make demo", "make test"]


def test_the_readme_shows_the_flow_as_an_svg_in_docs() -> None:
    text = (ROOT / "README.md").read_text()
    assert re.search(r"!\[[^\]]+\]\(docs/flow\.svg\)", text)
    root = ET.parse(ROOT / "docs" / "flow.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    words = " ".join(element.text or "" for element in root.iter())
    for needed in ("management cluster", "worker cluster", "mirror", "spec.managedBy"):
        assert needed in words


def test_the_compatibility_table_names_the_versions_that_matter() -> None:
    text = (ROOT / "README.md").read_text()
    table = text.split("## Compatibility", 1)[1].split("\n## ", 1)[0]
    for needed in (
        "1.32",
        "1.35",
        "1.30",
        "v1.35.4",
        "spec.managedBy",
        "ValidatingAdmissionPolicy",
    ):
        assert needed in table
