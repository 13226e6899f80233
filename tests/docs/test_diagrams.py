"""The site's diagrams keep their promises: every test a box names exists, every box is one of
the legend's kinds, every drawing is what its script draws, and every page's picture is there.
The legend: docs/diagrams.md."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DIAGRAMS = DOCS / "diagrams"
SOURCES = DIAGRAMS / "src"
SVG = "{http://www.w3.org/2000/svg}"
KINDS = {"proved", "subject", "dashed", "outside"}
SVGS = sorted(DIAGRAMS.glob("*.svg"))
# the script that draws each diagram
DRAWN_BY = {
    "legend.svg": "legend.py",
    "request-life.svg": "request.py",
    "fork-cow.svg": "fork.py",
    "snapshot-bytes.svg": "snapshot.py",
    "versus-llama-cpp.svg": "versus.py",
}


def groups(svg: Path) -> list[ET.Element]:
    return [g for g in ET.parse(svg).getroot().iter(f"{SVG}g") if "data-kind" in g.attrib]


def named_tests(svg: Path) -> list[str]:
    return [
        t.attrib["data-test"]
        for t in ET.parse(svg).getroot().iter(f"{SVG}text")
        if "data-test" in t.attrib
    ]


def test_the_four_diagrams_the_site_promises_are_there():
    assert {p.name for p in SVGS} == set(DRAWN_BY)


@pytest.mark.parametrize("svg", SVGS, ids=lambda p: p.name)
def test_every_named_test_exists(svg):
    names = named_tests(svg)
    assert names, f"{svg.name} names no test"
    for name in names:
        path, _, function = name.partition("::")
        source = ROOT / path
        assert source.is_file(), f"{svg.name}: no file {path}"
        assert re.search(rf"^\s*def {re.escape(function)}\(", source.read_text(), re.M), (
            f"{svg.name}: {path} has no test {function}"
        )


@pytest.mark.parametrize("svg", SVGS, ids=lambda p: p.name)
def test_every_box_is_one_of_the_legends_kinds_and_proved_boxes_name_their_test(svg):
    boxes = groups(svg)
    assert boxes and {g.attrib["data-kind"] for g in boxes} <= KINDS
    for g in boxes:
        if g.attrib["data-kind"] == "proved":
            title = next(g.iter(f"{SVG}text")).text
            assert any("data-test" in t.attrib for t in g.iter(f"{SVG}text")), (
                f"{svg.name}: the proved box {title!r} names no test"
            )


@pytest.mark.parametrize("svg", SVGS, ids=lambda p: p.name)
def test_every_diagram_is_what_its_script_draws(svg, tmp_path):
    out = tmp_path / svg.name
    subprocess.run(
        [sys.executable, str(SOURCES / DRAWN_BY[svg.name]), str(out)], check=True, cwd=SOURCES
    )
    assert out.read_bytes() == svg.read_bytes(), (
        f"docs/diagrams/{svg.name} differs from what docs/diagrams/src/{DRAWN_BY[svg.name]} "
        "draws: edit the script and run it again"
    )


def test_every_diagram_is_on_a_page_and_every_picture_exists():
    pages = {p.name: p.read_text() for p in DOCS.glob("*.md")}
    shown = {
        m for text in pages.values() for m in re.findall(r"\]\((diagrams/[\w.-]+\.svg)\)", text)
    }
    assert {f"diagrams/{p.name}" for p in SVGS} == shown
    for name in ("architecture.md", "state-engine.md", "index.md", "diagrams.md"):
        assert "diagrams/" in pages[name]


def test_llamay_is_lowercase_everywhere_on_the_site():
    allowed = re.compile(r"LlamayError|LLAMAY_\w+|LLAMAYKV")
    texts = [*DOCS.glob("*.md"), *SVGS, ROOT / "mkdocs.yml"]
    offending = [
        f"{path.name}: {word}"
        for path in texts
        for word in re.findall("llamay", allowed.sub("", path.read_text()), re.I)
        if word != "llamay"
    ]
    assert offending == []
