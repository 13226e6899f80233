"""The prefix tree: full KV pages kept after their contexts are gone, found again by tokens.

A radix tree over full pages (as SGLang's radix cache, with a page as the unit): a node is one
full page, keyed under its parent by the page_tokens token ids it holds, so the path from the
root spells a token prefix and its nodes hold that prefix's KV. A page's KV depends only on the
tokens up to its end, and the engine writes the same bits for the same tokens however they were
batched, so a matched page is exactly the page a cold prefill would write.

The tree holds one reference on each of its pages. A page whose refcount is 1 is held by the
tree alone (no context uses it): such leaves are what eviction frees, least recently used
first, and only when an allocation would otherwise fail.

Only pages whose every token was computed by this model go in: a context restored from a
snapshot (whose pages came from outside) never inserts, nor does anything that continues or
forks it (state/context.py), so no client's KV reaches another through the tree.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class References(Protocol):
    """The page references the tree takes and drops (the KV cache's page table)."""

    def incref(self, page: int) -> int: ...

    def decref(self, page: int) -> int: ...

    def refcount(self, page: int) -> int: ...


@dataclass(eq=False)
class _Node:
    key: tuple[int, ...]
    page: int
    parent: _Node | None
    last_used: int = 0
    children: dict[tuple[int, ...], _Node] = field(default_factory=dict)


class PrefixTree:
    """Cached full pages of one KV cache, by the tokens they hold."""

    def __init__(self, references: References, page_tokens: int) -> None:
        self.references = references
        self.page_tokens = page_tokens
        self._root = _Node((), -1, None)
        self._clock = itertools.count(1)
        self.n_pages = 0
        self.hits = 0
        self.misses = 0

    def match(self, tokens: Sequence[int]) -> list[int]:
        """The pages of the longest cached prefix of tokens, in position order (the caller
        takes its own reference on each). Counts a hit or a miss."""
        pages = []
        now = next(self._clock)
        node = self._root
        for key in self._keys(tokens):
            node = node.children.get(key)
            if node is None:
                break
            node.last_used = now
            pages.append(node.page)
        if pages:
            self.hits += 1
        else:
            self.misses += 1
        return pages

    def insert(self, tokens: Sequence[int], pages: Sequence[int]) -> None:
        """Caches the full pages of a context (tokens and its page table); a prefix already
        cached keeps its own pages."""
        now = next(self._clock)
        node = self._root
        for key, page in zip(self._keys(tokens), pages, strict=False):
            child = node.children.get(key)
            if child is None:
                child = _Node(key, int(page), node)
                self.references.incref(child.page)
                node.children[key] = child
                self.n_pages += 1
            child.last_used = now
            node = child

    def evict(self, n_pages: int) -> int:
        """Frees up to n_pages pages that only the tree holds, least recently used leaves
        first; returns how many it freed."""
        leaves = [(n.last_used, id(n), n) for n in self._nodes() if self._evictable(n)]
        heapq.heapify(leaves)
        freed = 0
        while leaves and freed < n_pages:
            _, _, node = heapq.heappop(leaves)
            parent = node.parent
            del parent.children[node.key]
            self.references.decref(node.page)
            self.n_pages -= 1
            freed += 1
            if parent is not self._root and self._evictable(parent):
                heapq.heappush(leaves, (parent.last_used, id(parent), parent))
        return freed

    def clear(self) -> None:
        """Drops every reference the tree holds."""
        for node in self._nodes():
            self.references.decref(node.page)
        self._root.children.clear()
        self.n_pages = 0

    def pages(self) -> list[int]:
        """Every page the tree holds."""
        return [node.page for node in self._nodes()]

    def _evictable(self, node: _Node) -> bool:
        return not node.children and self.references.refcount(node.page) == 1

    def _keys(self, tokens: Sequence[int]) -> list[tuple[int, ...]]:
        p = self.page_tokens
        return [tuple(tokens[i : i + p]) for i in range(0, len(tokens) - p + 1, p)]

    def _nodes(self) -> list[_Node]:
        nodes, stack = [], list(self._root.children.values())
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(node.children.values())
        return nodes
