"""The Go templates a /api/generate request may carry, in the small subset they use."""

from __future__ import annotations

import re

from llamay.server.errors import ApiError

_ACTION = re.compile(r"{{(-?)\s*(.*?)\s*(-?)}}", re.S)
_VARIABLE = re.compile(r"\.(System|Prompt|Response)")
_CONDITION = re.compile(r"if\s+\.(System|Prompt|Response)")


def render_template(template: str, system: str, prompt: str) -> str:
    """A request's Go template with what /api/generate gives it: `{{ .System }}`,
    `{{ .Prompt }}`, `{{ .Response }}` (empty: the answer follows), `{{ if .X }}...
    {{ else }}...{{ end }}`, and the `{{-`/`-}}` trims. Anything else is refused (400)."""
    values = {"System": system, "Prompt": prompt, "Response": ""}
    out: list[str] = []
    emitting = [True]  # one entry per open `if`: whether its current branch is output
    taken: list[bool] = []  # per open `if`: whether its condition held
    position, trim_next = 0, False
    for match in _ACTION.finditer(template):
        text = template[position : match.start()]
        text = text.lstrip() if trim_next else text
        text = text.rstrip() if match.group(1) else text
        if all(emitting):
            out.append(text)
        action, trim_next, position = match.group(2), bool(match.group(3)), match.end()
        variable = _VARIABLE.fullmatch(action)
        condition = _CONDITION.fullmatch(action)
        if variable:
            if all(emitting):
                out.append(values[variable.group(1)])
        elif condition:
            taken.append(bool(values[condition.group(1)]))
            emitting.append(taken[-1])
        elif action == "else" and taken:
            emitting[-1] = not taken[-1]
        elif action == "end" and taken:
            taken.pop()
            emitting.pop()
        else:
            raise ApiError(
                400,
                f"template action {{{{ {action} }}}} is not supported; llamay's templates take "
                ".System, .Prompt, .Response and if/else/end",
                "template",
            )
    if taken:
        raise ApiError(400, "template has an `if` without its `end`", "template")
    rest = template[position:]
    out.append(rest.lstrip() if trim_next else rest)
    return "".join(out)
