"""The `kernelbrain` command: its parser and commands (`main.py`), the terminal's progress
(`console.py`), `check`'s output (`check.py`) and the text and HTML reports."""
