"""The ops tools read a real aggregator: the API tests' app fixtures, on SQLite and PostgreSQL."""

from tests.api.conftest import client, database_url, make_client, migrated_sqlite

__all__ = ["client", "database_url", "make_client", "migrated_sqlite"]
