"""Alembic migrations: the only place the database schema is created or changed."""
