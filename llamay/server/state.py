"""What every route of one server shares."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from llamay.engine import Model
from llamay.server.config import ServerConfig
from llamay.server.metrics import Metrics
from llamay.server.models import ModelManager


@dataclass
class ServerState:
    """The server's config, its loaded models, its metrics, when it started; `extras` holds what
    one family keeps for itself (the native API's open contexts, under "contexts")."""

    config: ServerConfig
    models: ModelManager
    metrics: Metrics
    started_at: float = field(default_factory=time.time)
    extras: dict[str, Any] = field(default_factory=dict)

    def count_tokens(self, model: Model, prompt: int, generated: int) -> None:
        """Tokens a request evaluated and generated on `model`, counted under its resolved
        name: however a client spells a model, it is one series."""
        self.metrics.tokens(self.models.label_of(model), prompt, generated)
