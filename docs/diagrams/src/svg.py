"""Scratch helpers that write the committed SVG diagrams (readable, hand-editable output)."""

from html import escape

STYLE = """
  <style>
    text { font-family: 'DejaVu Sans', 'Liberation Sans', Arial, sans-serif; fill: #263238; }
    .title { font-size: 14px; font-weight: bold; }
    .body { font-size: 12px; }
    .test { font-family: 'DejaVu Sans Mono', 'Liberation Mono', monospace; font-size: 10px; fill: #1b5e20; }
    .note { font-size: 11px; fill: #546e7a; font-style: italic; }
    .head { font-size: 18px; font-weight: bold; }
    .mono { font-family: 'DejaVu Sans Mono', 'Liberation Mono', monospace; font-size: 11px; }
    .proved { fill: #ffffff; stroke: #2e7d32; stroke-width: 1.5; }
    .subject { fill: #fff3e0; stroke: #e65100; stroke-width: 3; }
    .dashed { fill: #fafafa; stroke: #9e9e9e; stroke-width: 1.5; stroke-dasharray: 6 4; }
    .dashed-text { fill: #757575; }
    .outside { fill: #eceff1; stroke: #546e7a; stroke-width: 1.2; }
    .plain { fill: #ffffff; stroke: #b0bec5; stroke-width: 1; }
    .arrow { stroke: #37474f; stroke-width: 1.5; fill: none; marker-end: url(#arrowhead); }
    .arrow-light { stroke: #90a4ae; stroke-width: 1.2; fill: none; marker-end: url(#arrowhead); stroke-dasharray: 4 3; }
  </style>
  <defs>
    <marker id="arrowhead" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
      <path d="M 0 0 L 10 5 L 0 10 z" fill="#37474f"/>
    </marker>
  </defs>
"""


def box_height(w, lines=(), tests=()):
    """The height box() needs for these lines and tests at width w."""
    fits = int((w - 20) / 6.1)
    wrapped = sum(1 for t in tests if len(t) + 2 > fits)
    return 19 + 16 * len(lines) + 14 * len(tests) + 13 * wrapped + 11


class Drawing:
    def __init__(self, width: int, height: int, title: str, desc: str) -> None:
        self.width, self.height = width, height
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="t d">',
            f'  <title id="t">{escape(title)}</title>',
            f'  <desc id="d">{escape(desc)}</desc>',
            STYLE,
            f'  <rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        ]

    def comment(self, text: str) -> None:
        self.parts.append(f"  <!-- {escape(text)} -->")

    def text(self, x, y, s, cls="body", anchor="start", extra="") -> None:
        self.parts.append(
            f'  <text x="{x}" y="{y}" class="{cls}" text-anchor="{anchor}"{extra}>{escape(s)}</text>'
        )

    def rect(self, x, y, w, h, cls, rx=6) -> None:
        self.parts.append(
            f'  <rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" class="{cls}"/>'
        )

    def box(self, x, y, w, h, kind, title, lines=(), tests=(), rx=6) -> None:
        """kind: proved, subject, dashed, outside, plain. tests: 'path::name' strings."""
        self.comment(f"{kind}: {title}")
        self.parts.append(f'  <g data-kind="{kind}">')
        self.rect(x, y, w, h, kind, rx=rx)
        tcls = "title dashed-text" if kind == "dashed" else "title"
        bcls = "body dashed-text" if kind == "dashed" else "body"
        cy = y + 19
        self.text(x + 10, cy, title, tcls)
        for line in lines:
            cy += 16
            self.text(x + 10, cy, line, bcls)
        fits = int((w - 20) / 6.1)
        for test in tests:
            cy += 14
            first, rest = (test, "") if len(test) + 2 <= fits else test.split("::", 1)
            first += "" if not rest else "::"
            self.parts.append(
                f'  <text x="{x + 10}" y="{cy}" class="test" data-test="{escape(test)}">'
                f"✓ {escape(first)}</text>"
            )
            if rest:
                cy += 13
                self.text(x + 22, cy, rest, "test")
        self.parts.append("  </g>")

    def arrow(self, points, cls="arrow", label=None, lx=None, ly=None) -> None:
        d = "M " + " L ".join(f"{px} {py}" for px, py in points)
        self.parts.append(f'  <path d="{d}" class="{cls}"/>')
        if label:
            self.text(lx, ly, label, "note")

    def line(self, x1, y1, x2, y2, color="#b0bec5", width=1, dash=None) -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'  <line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{color}" stroke-width="{width}"{extra}/>'
        )

    def cell(self, x, y, w, h, fill, label, sub=None, cls="mono", stroke="#546e7a") -> None:
        self.parts.append(
            f'  <rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}" stroke="{stroke}" stroke-width="1"/>'
        )
        if sub is None:
            self.text(x + w / 2, y + h / 2 + 4, label, cls, anchor="middle")
        else:
            self.text(x + w / 2, y + h / 2 - 3, label, cls, anchor="middle")
            self.text(x + w / 2, y + h / 2 + 11, sub, "note", anchor="middle")

    def save(self, path: str) -> None:
        self.parts.append("</svg>")
        with open(path, "w", encoding="utf-8") as out:
            out.write("\n".join(self.parts) + "\n")
