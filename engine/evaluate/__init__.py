"""Running candidates safely, engine side: the policy gate, the sandbox, the worker pool and
the verdict calls. No torch here: the code that runs inside the workers is `engine/worker/`.
"""
