"""The engine's public surface: the types every process shares (facts, results, requests,
budgets, the GPU's limits) and the doors the language server uses for its static analysis
(`analysis.py`, `tasks.py`). Nothing here imports torch, triton, the search, the evaluation or
the worker, so the language server imports what it needs of it (`tests/test_import_boundaries.py`).
"""
