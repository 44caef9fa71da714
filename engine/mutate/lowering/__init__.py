"""The lowering mutator's parts: Inductor's output code read (`output_code.py`), its helpers
inlined (`helpers.py`) and the whole written into the user's module (`transplant.py`)."""
