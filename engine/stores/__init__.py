"""Adapters of the store port (`loopstate.engine.store`): memory (one process), SQLite, the
embedded default, and PostgreSQL for several processes on several hosts."""
