"""The import contract (tools/check_layers.py): the source tree keeps it, and the checker sees
each kind of breach it exists for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKER = ROOT / "tools" / "check_layers.py"


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHECKER), str(root)], capture_output=True, text=True, check=False
    )


def test_the_source_tree_keeps_the_import_contract():
    result = check(ROOT)
    assert result.returncode == 0, result.stdout
    assert "imports point down" in result.stdout


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """A minimal package tree: llamay/ and cli/ with the given modules."""
    for name, text in {"llamay/__init__.py": "", "cli/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_an_upward_import_inside_a_function_is_caught(tmp_path):
    tree = write_tree(
        tmp_path,
        {
            "llamay/gguf/__init__.py": "",
            "llamay/store/__init__.py": "",
            "llamay/gguf/reader.py": "def f():\n    from llamay.store import resolve\n",
        },
    )
    result = check(tree)
    assert result.returncode == 1
    assert "llamay/gguf/reader.py:2: upward import of llamay.store" in result.stdout


def test_a_type_checking_import_and_a_cycle_between_packages_are_caught(tmp_path):
    tree = write_tree(
        tmp_path,
        {
            "llamay/models/__init__.py": "from llamay.grammar import x\n",
            "llamay/grammar/__init__.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import llamay.models\n"
            ),
        },
    )
    result = check(tree)
    assert result.returncode == 1
    assert "sideways import of llamay.grammar" in result.stdout
    assert "sideways import of llamay.models" in result.stdout
    assert "package cycle: llamay.grammar -> llamay.models -> llamay.grammar" in result.stdout


def test_reading_another_modules_underscore_names_is_caught(tmp_path):
    tree = write_tree(
        tmp_path,
        {
            "llamay/state/__init__.py": "",
            "llamay/state/context.py": "class C:\n    def __init__(self):\n        self._tokens = []\n",
            "llamay/engine/__init__.py": "",
            "llamay/engine/model.py": (
                "from llamay.state.context import C, _helper\n"
                "def f(c: C):\n    return c._tokens, c.__dict__\n"
            ),
        },
    )
    result = check(tree)
    assert result.returncode == 1
    assert "model.py:1: imports llamay.state.context's private name _helper" in result.stdout
    assert "model.py:3: reads _tokens" in result.stdout
    assert "__dict__" not in result.stdout
    assert "context.py" not in result.stdout  # a module may read what it defines itself
