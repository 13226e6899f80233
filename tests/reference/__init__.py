"""A float64 numpy reference forward pass per model family, after llama.cpp: the tests' spec."""

from reference.forward import ReferenceModel, log_softmax
from reference.perplexity import perplexity

__all__ = ["ReferenceModel", "log_softmax", "perplexity"]
