"""`python -m kernelbrain.server`: the language server over stdio (same as `kernelbrain serve`)."""

from .app import serve

serve()
