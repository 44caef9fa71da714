"""The search: fidelity ladder, successive halving, budget, dispatch variants, static cost model."""

from .budget import Budget, parse_duration
from .engine import Search, SearchError
from .result import SearchEvent, SearchResult

__all__ = ["Budget", "Search", "SearchError", "SearchEvent", "SearchResult", "parse_duration"]
