"""What a failed admin call raises, whichever client made it."""

from __future__ import annotations

import http
import json

__all__ = ["AdminError", "AdminHttpError", "AdminUnreachableError", "describe_status", "reason_of"]


class AdminError(Exception):
    """A failed admin call; the message says what happened."""


class AdminHttpError(AdminError):
    """The broker answered an error status.

    Attributes:
        status: The HTTP status.
        reason: Pulsar's ``{"reason": ...}``, else the body's text (may be empty).
        body: The body as text.
    """

    def __init__(self, message: str, *, status: int, reason: str, body: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.body = body


class AdminUnreachableError(AdminError):
    """No answer: nothing listens there, the connection broke, or the call timed out."""


def reason_of(body: str) -> str:
    """Pulsar's error ``reason`` of a body, else the body's text (stripped)."""
    try:
        reason = json.loads(body)["reason"]
    except (ValueError, KeyError, TypeError):
        return body.strip()
    return str(reason)


def describe_status(status: int, body: str) -> str:
    """``<status> <phrase>: <reason>``, as ``pulsar-admin`` prints a failed call."""
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    reason = reason_of(body)
    return f"{status} {phrase}: {reason}" if reason else f"{status} {phrase}"
