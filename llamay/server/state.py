"""What every route of one server shares."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import falcon

from llamay.engine import Model
from llamay.server.config import ServerConfig
from llamay.server.contexts import ContextRegistry
from llamay.server.errors import read_json
from llamay.server.metrics import Metrics
from llamay.server.models import ModelManager


@dataclass
class ServerState:
    """The server's config, its loaded models, its metrics, the contexts every API keeps on
    the server (contexts.py), when it started. `draining`: SIGTERM came (listen.py); /ready
    answers 503 from then on."""

    config: ServerConfig
    models: ModelManager
    metrics: Metrics
    contexts: ContextRegistry
    started_at: float = field(default_factory=time.time)
    draining: bool = False

    def count_tokens(self, model: Model, prompt: int, generated: int) -> None:
        """Tokens a request evaluated and generated on `model`, counted under its resolved
        name: however a client spells a model, it is one series."""
        self.metrics.tokens(self.models.label_of(model), prompt, generated)


class Route:
    """A resource of the server's route table: the state every route shares, and the JSON
    body of its request (errors.read_json, bounded by the config's max_body_bytes)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    def body(self, req: falcon.Request) -> dict[str, Any]:
        return read_json(req, self.state.config.max_body_bytes)
