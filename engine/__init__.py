"""KernelBrain engine: kernel index, rules, evaluation, search, profiling."""
