"""Errors the aggregator raises on input that passed schema validation but cannot be used.

MfumonError
└── InputError (a 422 naming the field)
"""

from __future__ import annotations


class MfumonError(Exception):
    """Base of the aggregator's own errors."""


class InputError(MfumonError, ValueError):
    """A request field that cannot be used as sent; routes answer 422 naming ``field``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
