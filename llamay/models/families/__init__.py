"""The family files: each module's FAMILIES lists the architectures it describes
(llamay/models/registry.py finds them)."""
