"""Checks that make a grammar safe to sample from: every referenced rule is defined, no rule is
left-recursive (directly, indirectly, or behind a prefix that can be empty), and every rule the
root can reach derives at least one finite string, so that generation can always finish."""

from __future__ import annotations

from llamay.errors import GrammarError
from llamay.grammar import utf8
from llamay.grammar.syntax import Class, Group, Item, Literal, Ref, Repeat, Rules, Sequence


def check(rules: Rules, root: str) -> None:
    """GrammarError naming the first problem found."""
    if root not in rules:
        raise GrammarError(f"the grammar has no rule '{root}' to start from")
    _check_defined(rules)
    _check_left_recursion(rules)
    _check_productive(rules, root)


def productive_rules(rules: Rules) -> set[str]:
    """The rules that derive at least one finite string."""
    done: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, alternatives in rules.items():
            if name not in done and any(_all_productive(seq, done) for seq in alternatives):
                done.add(name)
                changed = True
    return done


def is_productive(item: Item, productive: set[str]) -> bool:
    """Whether `item` derives a finite string, given the productive rules."""
    if isinstance(item, Literal):
        return True
    if isinstance(item, Class):
        return bool(utf8.code_points(item.ranges, item.negated))
    if isinstance(item, Ref):
        return item.name in productive
    if isinstance(item, Group):
        return any(_all_productive(seq, productive) for seq in item.alternatives)
    return item.min == 0 or is_productive(item.item, productive)


def _all_productive(seq: Sequence, productive: set[str]) -> bool:
    return all(is_productive(item, productive) for item in seq)


def _refs(item: Item) -> list[str]:
    if isinstance(item, Ref):
        return [item.name]
    if isinstance(item, Group):
        return [name for seq in item.alternatives for it in seq for name in _refs(it)]
    if isinstance(item, Repeat):
        return _refs(item.item)
    return []


def _check_defined(rules: Rules) -> None:
    for name, alternatives in rules.items():
        for seq in alternatives:
            for item in seq:
                for ref in _refs(item):
                    if ref not in rules:
                        raise GrammarError(f"rule '{name}' refers to undefined rule '{ref}'")


# --- left recursion -------------------------------------------------------------------------


def _nullable_rules(rules: Rules) -> set[str]:
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, alternatives in rules.items():
            if name not in nullable and any(_seq_nullable(s, nullable) for s in alternatives):
                nullable.add(name)
                changed = True
    return nullable


def _nullable(item: Item, nullable: set[str]) -> bool:
    if isinstance(item, Literal):
        return not item.chars
    if isinstance(item, Class):
        return False
    if isinstance(item, Ref):
        return item.name in nullable
    if isinstance(item, Group):
        return any(_seq_nullable(seq, nullable) for seq in item.alternatives)
    return item.min == 0 or _nullable(item.item, nullable)


def _seq_nullable(seq: Sequence, nullable: set[str]) -> bool:
    return all(_nullable(item, nullable) for item in seq)


def _leading_refs(seq: Sequence, nullable: set[str]) -> list[str]:
    """The rules a derivation of `seq` can start with: the refs up to the first item that
    cannot be empty."""
    out: list[str] = []
    for item in seq:
        out += _item_leading_refs(item, nullable)
        if not _nullable(item, nullable):
            break
    return out


def _item_leading_refs(item: Item, nullable: set[str]) -> list[str]:
    if isinstance(item, Ref):
        return [item.name]
    if isinstance(item, Group):
        return [n for seq in item.alternatives for n in _leading_refs(seq, nullable)]
    if isinstance(item, Repeat) and item.max != 0:
        return _item_leading_refs(item.item, nullable)
    return []


def _check_left_recursion(rules: Rules) -> None:
    nullable = _nullable_rules(rules)
    edges = {
        name: list(dict.fromkeys(n for seq in alts for n in _leading_refs(seq, nullable)))
        for name, alts in rules.items()
    }
    finished: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycle = [*path[path.index(name) :], name]
            raise GrammarError(
                f"rule '{name}' is left-recursive: {' -> '.join(cycle)} "
                "(rewrite it to consume text before recursing, e.g. with repetition)"
            )
        if name in finished:
            return
        path.append(name)
        for nxt in edges[name]:
            visit(nxt, path)
        path.pop()
        finished.add(name)

    for name in rules:
        visit(name, [])


# --- emptiness -----------------------------------------------------------------------------


def _check_productive(rules: Rules, root: str) -> None:
    productive = productive_rules(rules)
    reachable, todo = [root], [root]
    while todo:
        for seq in rules[todo.pop()]:
            for item in seq:
                for ref in _refs(item):
                    if ref not in reachable:
                        reachable.append(ref)
                        todo.append(ref)
    if root not in productive:
        raise GrammarError(
            f"the grammar's language is empty: rule '{root}' derives no finite string "
            "(every alternative recurses forever or matches no character)"
        )
    for name in reachable:
        if name not in productive:
            raise GrammarError(
                f"rule '{name}' derives no finite string (every alternative recurses forever "
                "or matches no character): give it an alternative that ends"
            )
