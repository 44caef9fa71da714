"""Evaluation: candidates, the policy gate, sandboxed workers, correctness and timing.

Modules that import torch/triton (`worker`, `harness`, `audit`, `compare`, `shapes`, `timing`)
run only inside worker processes; everything else is importable by the server and the CLI.
"""
