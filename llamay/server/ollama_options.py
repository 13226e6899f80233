"""Ollama's names for the generation options, and the `model.generate` keyword each stands for.

A model pulled from an Ollama registry carries its defaults under these names (its params
layer); Ollama's /api routes take them in `options`; `llamay run`'s /set speaks them. This is the
one table that translates them.
"""

from __future__ import annotations

OLLAMA_OPTIONS: dict[str, str] = {
    "num_predict": "max_tokens",
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "typical_p": "typical_p",
    "repeat_penalty": "repeat_penalty",
    "repeat_last_n": "repeat_last_n",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "seed": "seed",
    "stop": "stop",
}
