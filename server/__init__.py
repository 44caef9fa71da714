"""KernelBrain language server (pygls): LSP only; delegates heavy work to the engine."""
