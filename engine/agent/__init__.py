"""The editor's engine process: the agent the language server drives over JSON-RPC (`main.py`),
its messages (`protocol.py`) and its search jobs (`jobs.py`)."""
