"""LLM-guided mutation over any OpenAI-compatible endpoint: settings, the client, prompts,
decoding answers, and the mutator the search calls. Every proposal is untrusted code: it meets
the same gate, sandbox and judge as any other candidate."""

from .mutator import LLMMutator, LLMUnavailable
from .settings import LLMSettings

__all__ = ["LLMMutator", "LLMSettings", "LLMUnavailable"]
