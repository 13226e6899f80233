"""The Go template subset of /api/generate's `template`."""

from __future__ import annotations

import pytest

from llamay.server.errors import ApiError
from llamay.server.ollama_template import render_template


@pytest.mark.parametrize(
    ("template", "system", "expected"),
    [
        ("{{ .Prompt }}", "", "Hi"),
        ("[{{ .System }}] {{ .Prompt }}{{ .Response }}", "Be brief.", "[Be brief.] Hi"),
        ("{{ if .System }}S: {{ .System }}\n{{ end }}U: {{ .Prompt }}", "", "U: Hi"),
        ("{{ if .System }}S: {{ .System }}\n{{ end }}U: {{ .Prompt }}", "x", "S: x\nU: Hi"),
        ("{{ if .System }}{{ .System }}{{ else }}none{{ end }}|{{ .Prompt }}", "", "none|Hi"),
        ("{{ if .System }}{{ .System }}{{ else }}none{{ end }}|{{ .Prompt }}", "s", "s|Hi"),
        ("{{ if .Prompt }}{{ if .System }}a{{ else }}b{{ end }}{{ end }}", "", "b"),
        ("{{ if .Response }}never{{ end }}{{ .Prompt }}", "", "Hi"),
        ("A  \n {{- .Prompt -}} \n  B", "", "AHiB"),
        ("{{.Prompt}}", "", "Hi"),
    ],
)
def test_render(template, system, expected):
    assert render_template(template, system, "Hi") == expected


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("{{ range .Messages }}{{ .Content }}{{ end }}", "range .Messages"),
        ("{{ .Tools }}", ".Tools"),
        ("{{ if .System }}open", "without its `end`"),
        ("{{ end }}", "{{ end }}"),
    ],
)
def test_unsupported_templates_are_400(template, fragment):
    with pytest.raises(ApiError) as refused:
        render_template(template, "", "Hi")
    assert refused.value.status == 400
    assert fragment in refused.value.message
