"""Code that runs inside the sandboxed worker processes, with torch and triton.

Every module here runs in a bubblewrap sandbox (`engine/evaluate/sandbox.py`): as the judge (the
task's harness: original, reference, inputs; never a candidate), as a candidate's runner, as a
compile worker, or under Nsight Compute. It reaches only the engine's bottom floor (`engine.api`,
`engine.protocol`, `engine.task`, `engine.index`), never the search, the store, the LLM or the
server (`tests/test_import_boundaries.py`).
"""
