"""Running models: load, contexts, the batched forward pass, perplexity."""

from __future__ import annotations

from llamay.engine.context import Context
from llamay.engine.model import Model, load
from llamay.engine.perplexity import perplexity

__all__ = ["Context", "Model", "load", "perplexity"]
