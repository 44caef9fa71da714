"""The search: fidelity ladder, selection, end game, ledger and the static cost model.

Kept empty on purpose: importing a module of this package loads only what that module needs.
"""
