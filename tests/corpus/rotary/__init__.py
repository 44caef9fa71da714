"""A package of kernels: `rope.py` imports its helpers relative to it."""
