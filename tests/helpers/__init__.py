"""What tests share: tiny model writers, llama.cpp acceptance checks, real servers on loopback
(a model registry, an upstream provider), CLI runners. Importable as `helpers` (setup.cfg puts
tests/ on the path)."""
