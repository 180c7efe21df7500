"""Adapters of the store port (`loopstate.engine.store`, which also holds `MemoryStore`):
SQLite, the embedded default, and PostgreSQL for several processes on several hosts."""
