"""The engine's public types for front ends (the CLI, the language server, the editor's agent).

Plain msgspec structs and pure functions: nothing here imports torch, triton, the search, the
mutators or the evaluation pool, so the language server can import all of it
(`tests/test_import_boundaries.py`).
"""
