"""Arrays that psycopg sends to PostgreSQL in binary, for statements that take many rows as a few arrays.

psycopg sends a list in text format unless told otherwise, and text format quotes and escapes every element in
Python: for the node samples (JSON, about 3 KB and a few hundred quotes each) that cost ~25 us of CPU per node, with
the GIL held, in every group commit. In binary format each element is sent as it is.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.types import TypeDecorator, TypeEngine


class BinaryList(list[Any]):
    """A list that psycopg dumps as a binary array (see :func:`register`)."""


class BinaryArray(TypeDecorator[list[Any]]):
    """``ARRAY(item_type)`` whose bound values go to psycopg as :class:`BinaryList`."""

    impl = ARRAY
    cache_ok = True

    def __init__(self, item_type: TypeEngine[Any]) -> None:
        super().__init__(item_type)

    def bind_processor(self, dialect: Any) -> Any:
        return BinaryList  # not ARRAY's own processor, which copies the value into a plain list


def register(dbapi_connection: Any) -> None:
    """Teach a psycopg connection to send :class:`BinaryList` in binary (called when the engine connects)."""
    from psycopg.types.array import ListBinaryDumper

    dbapi_connection.adapters.register_dumper(BinaryList, ListBinaryDumper)
