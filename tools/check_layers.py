"""The import contract: llamay's packages are layers, and imports point down only.

    python tools/check_layers.py [ROOT]

reads every module under ROOT/llamay and ROOT/cli (the CLI installs as llamay.cli), with every
import it makes: at the top, inside functions, under `if TYPE_CHECKING:`. It fails (exit 1,
one line per breach) when

- a module imports from a package of the same or a higher layer than its own (LAYERS below;
  a package may import itself), which also rules out every cycle between packages;
- packages import each other in a cycle (what the layers rule out, checked on its own so that
  two packages of one layer cannot lean on each other either);
- a module reads another module's underscore name: `from m import _name`, or `x._name` for an
  underscore attribute that the module itself never defines (dunders are public).

Cython files (.pyx) are held to the layers through their Python-level imports; their `cimport`s
are C-level and stay inside llamay._core.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

# Lowest first. A module may import modules of a lower layer, and of its own package.
LAYERS: list[tuple[str, ...]] = [
    ("llamay.errors", "llamay._version", "llamay.paths"),
    ("llamay._core",),
    ("llamay.gguf",),
    ("llamay.tokenizer",),
    ("llamay.models", "llamay.grammar"),
    ("llamay.state",),
    ("llamay.backends",),
    ("llamay.engine",),
    ("llamay.chat", "llamay.store", "llamay.providers"),
    ("llamay",),  # the package root: load() and load_tokenizer() resolve store names
    ("llamay.verify", "llamay.server"),
    ("llamay.cli",),
]
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def package_of(module: str) -> str:
    """The layer entry a module belongs to: the longest entry that prefixes it."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in RANK:
            return candidate
    raise KeyError(f"{module} is in no layer: add its package to LAYERS in tools/check_layers.py")


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    found: dict[str, Path] = {}
    for base, prefix in ((root / "llamay", "llamay"), (root / "cli", "llamay.cli")):
        for path in sorted(base.rglob("*.py")) + sorted(base.rglob("*.pyx")):
            parts = path.relative_to(base).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((prefix, *parts))] = path
    return found


def python_source(path: Path) -> str:
    """The module's Python; for Cython, its Python-level import lines only."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".pyx":
        return text
    return "\n".join(
        line
        for line in text.splitlines()
        if line.startswith(("import ", "from ")) and " cimport " not in line
    )


def imports(module: str, tree: ast.Module, known: set[str]) -> list[tuple[str, int, list[str]]]:
    """(imported module, line, names taken from it) for every import in the tree."""
    found = []
    package = (
        module if module in known and _is_package(module, known) else module.rpartition(".")[0]
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known:
                    found.append((submodule, node.lineno, []))
                else:
                    found.append((base, node.lineno, [alias.name]))
    return [(name, line, names) for name, line, names in found if name.split(".")[0] == "llamay"]


def _is_package(module: str, known: set[str]) -> bool:
    return any(other.startswith(module + ".") for other in known)


def defined_underscore_names(tree: ast.Module) -> set[str]:
    """Underscore names the module defines: functions, classes, assignments (self._x = ...)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return {name for name in names if _private(name)}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def check(root: Path) -> list[str]:
    """Every breach of the contract in the tree at root, one line each."""
    known_paths = modules(root)
    known = set(known_paths)
    problems = []
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in known_paths.items():
        tree = ast.parse(python_source(path), filename=str(path))
        own = package_of(module)
        where = path.relative_to(root)
        for target, line, names in imports(module, tree, known):
            if target not in known:
                problems.append(f"{where}:{line}: imports {target}, which does not exist")
                continue
            theirs = package_of(target)
            if theirs != own:
                graph[own].add(theirs)
            if theirs != own and RANK[theirs] >= RANK[own]:
                direction = "upward" if RANK[theirs] > RANK[own] else "sideways"
                problems.append(
                    f"{where}:{line}: {direction} import of {target} ({theirs}, layer "
                    f"{RANK[theirs]}) from {own} (layer {RANK[own]})"
                )
            for name in names:
                if _private(name):
                    problems.append(f"{where}:{line}: imports {target}'s private name {name}")
        if path.suffix == ".py":
            defined = defined_underscore_names(tree)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and _private(node.attr)
                    and node.attr not in defined
                ):
                    problems.append(
                        f"{where}:{node.lineno}: reads {node.attr}, an underscore name that "
                        "another module defines"
                    )
    problems += [f"package cycle: {' -> '.join(cycle)}" for cycle in cycles(graph)]
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of nodes (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [group + group[:1] for group in groups]


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"the import contract is broken in {len(problems)} place(s)", file=sys.stderr)
        return 1
    print(f"import contract: {len(modules(root))} modules, imports point down, no package cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
