"""workspace/executeCommand handlers."""

from __future__ import annotations

from lsprotocol import types

from .code_lens import OPTIMIZE_COMMAND


def register(server) -> None:
    @server.command(OPTIMIZE_COMMAND)
    def optimize(ls, *args):
        """Start a search for a kernel. The search engine is not wired in yet: say so clearly."""
        uri, kernel = (list(args) + [None, None])[:2]
        message = (
            f"KernelBrain: the optimization search is not available yet, so `{kernel}` was not optimized. "
            "Static diagnostics and hover work now."
        )
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=message))
        return {"started": False, "kernel": kernel, "uri": uri, "message": message}
