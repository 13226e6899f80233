"""The Go templates a /api/generate request may carry, in the small subset they use.

The template is a client's: it is read in one pass (each `{{` finds its `}}` with one forward
search, and the open `if`s are counted, not rescanned), so its cost is linear in its length.
"""

from __future__ import annotations

import re

from llamay.server.errors import ApiError

_VARIABLE = re.compile(r"\.(System|Prompt|Response)")
_CONDITION = re.compile(r"if\s+\.(System|Prompt|Response)")


def render_template(template: str, system: str, prompt: str) -> str:
    """A request's Go template with what /api/generate gives it: `{{ .System }}`,
    `{{ .Prompt }}`, `{{ .Response }}` (empty: the answer follows), `{{ if .X }}...
    {{ else }}...{{ end }}`, and the `{{-`/`-}}` trims. Anything else is refused (400)."""
    values = {"System": system, "Prompt": prompt, "Response": ""}
    out: list[str] = []
    taken: list[bool] = []  # per open `if`: whether its condition held
    in_else: list[bool] = []  # per open `if`: whether its `else` has been passed
    muted = 0  # how many open `if`s are in a branch that is not output
    position, trim_next = 0, False
    while (start := template.find("{{", position)) >= 0:
        end = template.find("}}", start + 2)
        if end < 0:  # no closing braces: the rest is text, as Go's parser would fail on anyway
            break
        inside = template[start + 2 : end]
        trim_left, trim_right = inside.startswith("-"), inside.endswith("-")
        action = inside[1 if trim_left else 0 : len(inside) - 1 if trim_right else None].strip()
        text = template[position:start]
        text = text.lstrip() if trim_next else text
        text = text.rstrip() if trim_left else text
        if not muted:
            out.append(text)
        trim_next, position = trim_right, end + 2
        variable = _VARIABLE.fullmatch(action)
        condition = _CONDITION.fullmatch(action)
        if variable:
            if not muted:
                out.append(values[variable.group(1)])
        elif condition:
            taken.append(bool(values[condition.group(1)]))
            in_else.append(False)
            muted += not taken[-1]
        elif action == "else" and taken and not in_else[-1]:
            in_else[-1] = True
            muted += 1 if taken[-1] else -1
        elif action == "end" and taken:
            muted -= taken[-1] == in_else[-1]
            taken.pop()
            in_else.pop()
        else:
            shown = action if len(action) <= 60 else action[:60] + "..."
            raise ApiError(
                400,
                f"template action {{{{ {shown} }}}} is not supported; llamay's templates take "
                ".System, .Prompt, .Response and if/else/end",
                "template",
            )
    if taken:
        raise ApiError(400, "template has an `if` without its `end`", "template")
    rest = template[position:]
    out.append(rest.lstrip() if trim_next else rest)
    return "".join(out)
