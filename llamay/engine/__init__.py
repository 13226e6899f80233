"""Running models: the Model (a backend and its KV cache), generation, the scheduler that
batches sequences, perplexity."""

from __future__ import annotations

from llamay.engine.model import Model
from llamay.engine.perplexity import perplexity
from llamay.state import Context

__all__ = ["Context", "Model", "perplexity"]
