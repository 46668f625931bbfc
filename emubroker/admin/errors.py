"""REST errors: Pulsar's ``{"reason": ...}`` bodies and the status of every failure, in one place.

A Pulsar broker answers a failed admin call with the HTTP status its ``RestException`` carries
and a JSON body ``{"reason": "<message>"}`` (``ErrorData``); ``pulsar-admin`` prints the reason.
Handlers raise :class:`RestError` with Pulsar's status and wording; :func:`rest_errors` (an
aiohttp middleware) turns it, and the domain errors that reach it unconverted, into that body:

* policy store: not found -> 404, already exists -> 409, concurrent modification -> 409;
* topic layer (``protocol.errors.BrokerError``): by server error code, :func:`status_of`;
* aiohttp's own routing errors (unknown path 404, wrong method 405) keep their status;
* anything else is a bug: logged, 500 with the exception as the reason.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from aiohttp import web

from emubroker.policies import PolicyExistsError, PolicyNotFoundError, PolicyStoreError
from protocol.errors import BrokerError, ServerError

if TYPE_CHECKING:
    from aiohttp.typedefs import Handler

__all__ = ["RestError", "error_response", "rest_errors", "status_of"]

log = logging.getLogger(__name__)

BAD_REQUEST: Final = 400
NOT_FOUND: Final = 404
METHOD_NOT_ALLOWED: Final = 405
NOT_ACCEPTABLE: Final = 406
CONFLICT: Final = 409
PRECONDITION_FAILED: Final = 412
UNPROCESSABLE: Final = 422
INTERNAL: Final = 500
UNAVAILABLE: Final = 503

# What the topic layer's errors mean over REST (they are the binary protocol's codes).
_BROKER_ERROR_STATUS: Final = {
    ServerError.TopicNotFound: NOT_FOUND,
    ServerError.SubscriptionNotFound: NOT_FOUND,
    ServerError.ConsumerNotFound: NOT_FOUND,
    ServerError.InvalidTopicName: PRECONDITION_FAILED,
    ServerError.NotAllowedError: PRECONDITION_FAILED,
    ServerError.ConsumerBusy: PRECONDITION_FAILED,
    ServerError.ProducerBusy: PRECONDITION_FAILED,
    ServerError.TopicTerminatedError: PRECONDITION_FAILED,
    ServerError.IncompatibleSchema: CONFLICT,
    ServerError.ServiceNotReady: UNAVAILABLE,
    ServerError.TooManyRequests: 429,
}


class RestError(Exception):
    """A failed admin call: Pulsar's status and reason.

    Args:
        status: The HTTP status.
        reason: What ``{"reason": ...}`` says.
    """

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def error_response(status: int, reason: str) -> web.Response:
    """A ``{"reason": ...}`` JSON response."""
    return web.json_response({"reason": reason}, status=status)


def status_of(exc: BrokerError) -> int:
    """The HTTP status for a topic-layer error (500 for codes without a REST meaning)."""
    return _BROKER_ERROR_STATUS.get(exc.code, INTERNAL)


@web.middleware
async def rest_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure of a handler into Pulsar's error body (see the module docstring)."""
    try:
        return await handler(request)
    except RestError as exc:
        return error_response(exc.status, exc.reason)
    except web.HTTPException as exc:
        if exc.status < BAD_REQUEST:
            raise
        if exc.status == NOT_FOUND and request.match_info.http_exception is not None:
            # No route matched: say so, rather than a bare "Not Found" a user reads as "no such
            # topic".
            reason = f"No such REST endpoint here: {request.method} {request.path}"
            return error_response(NOT_FOUND, reason)
        return error_response(exc.status, exc.reason)
    except PolicyNotFoundError as exc:
        return error_response(NOT_FOUND, str(exc))
    except PolicyExistsError as exc:
        return error_response(CONFLICT, str(exc))
    except PolicyStoreError as exc:
        return error_response(CONFLICT, str(exc))
    except BrokerError as exc:
        return error_response(status_of(exc), exc.message)
    except Exception as exc:
        log.exception("admin call %s %s failed", request.method, request.path)
        return error_response(INTERNAL, f"Internal error: {exc!r}")
