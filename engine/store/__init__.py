"""SQLite store of candidates, outcomes, measurements, ceilings and search history."""

from .db import SCHEMA_VERSION, SearchBusy, Store, StoreNotice, kernel_key

__all__ = ["SCHEMA_VERSION", "SearchBusy", "Store", "StoreNotice", "kernel_key"]
