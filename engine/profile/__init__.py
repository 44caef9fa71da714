"""Profiling: the compiled view (AOT, no GPU), measured views, explanations, whole programs."""
