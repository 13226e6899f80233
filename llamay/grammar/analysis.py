"""Checks that make a grammar safe to sample from: every referenced rule is defined, no rule is
left-recursive (directly, indirectly, or behind a prefix that can be empty), and every rule the
root can reach derives at least one finite string, so that generation can always finish."""

from __future__ import annotations

from collections.abc import Callable

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
    return _derive(rules, lambda item: not isinstance(item, Class) or is_productive(item, set()))


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
    """The rules that derive the empty string."""
    return _derive(rules, lambda item: isinstance(item, Literal) and not item.chars)


def _derive(rules: Rules, leaf: Callable[[Literal | Class], bool]) -> set[str]:
    """The rules that derive a string with a property that a sequence has when each of its
    items has it, a choice when one alternative has it, a repetition when it may repeat zero
    times or its item has it, and a literal or class when `leaf` says so (productive: derives
    a finite string; nullable: derives the empty one).

    A least fixed point computed as Horn clauses are (Dowling and Gallier): each alternative
    counts the parts it still waits for, and a part found to have the property is told to the
    alternatives that wait for it, once each: linear in the size of the grammar, however the
    rules are ordered. A group is a part of its own, an anonymous rule."""
    owner: list[int] = []  # each alternative's part
    waiting: list[int] = []  # each alternative's count of parts without the property yet
    waiters: list[list[int]] = []  # each part's alternatives waiting on it (once per use)
    index = {name: i for i, name in enumerate(rules)}
    waiters.extend([] for _ in rules)
    found: list[int] = []

    def add_part() -> int:
        waiters.append([])
        return len(waiters) - 1

    def add_alternatives(part: int, alternatives: tuple[Sequence, ...]) -> None:
        for seq in alternatives:
            needs: list[int] = []
            possible = True
            for item in seq:
                need = requirement(item)
                if need is False:
                    possible = False
                elif need is not True:
                    needs.append(need)
            if not possible:
                continue
            alternative = len(owner)
            owner.append(part)
            waiting.append(len(needs))
            for need in needs:
                waiters[need].append(alternative)
            if not needs:
                found.append(part)

    def requirement(item: Item) -> bool | int:
        """True or False when `item` has the property or not whatever the rules derive, else
        the part it depends on."""
        while isinstance(item, Repeat):
            if item.min == 0:
                return True
            item = item.item
        if isinstance(item, (Literal, Class)):
            return leaf(item)
        if isinstance(item, Ref):
            return index.get(item.name, False)
        part = add_part()  # a group
        add_alternatives(part, item.alternatives)
        return part

    for name, alternatives in rules.items():
        add_alternatives(index[name], alternatives)
    done = [False] * len(waiters)
    while found:
        part = found.pop()
        if done[part]:
            continue
        done[part] = True
        for alternative in waiters[part]:
            waiting[alternative] -= 1
            if waiting[alternative] == 0:
                found.append(owner[alternative])
    return {name for name, i in index.items() if done[i]}


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
    # A depth-first search without recursion (a chain of rules can be as long as the grammar):
    # a rule met again while it is on the path closes a cycle.
    on_path: dict[str, int] = {}  # rule -> its place in `path`
    finished: set[str] = set()
    for start in rules:
        if start in finished:
            continue
        path = [start]
        on_path[start] = 0
        branches = [iter(edges[start])]
        while branches:
            nxt = next(branches[-1], None)
            if nxt is None:
                done = path.pop()
                del on_path[done]
                finished.add(done)
                branches.pop()
            elif nxt in on_path:
                cycle = [*path[on_path[nxt] :], nxt]
                raise GrammarError(
                    f"rule '{nxt}' is left-recursive: {' -> '.join(cycle)} "
                    "(rewrite it to consume text before recursing, e.g. with repetition)"
                )
            elif nxt not in finished:
                on_path[nxt] = len(path)
                path.append(nxt)
                branches.append(iter(edges[nxt]))


# --- emptiness -----------------------------------------------------------------------------


def _check_productive(rules: Rules, root: str) -> None:
    productive = productive_rules(rules)
    reachable, todo = {root: None}, [root]  # a dict: a set that keeps the order found
    while todo:
        for seq in rules[todo.pop()]:
            for item in seq:
                for ref in _refs(item):
                    if ref not in reachable:
                        reachable[ref] = None
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
