"""The model zoo: one small file per family, the shared blocks, and the registry."""
