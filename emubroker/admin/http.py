"""Request parsing and responses shared by the ``routes_*`` modules.

Validation happens here, at the boundary (STYLE.md §1.5): a body is decoded straight into its
msgspec type, so a malformed body or a field of the wrong type is a 400 with a reason before any
handler logic runs, and names are parsed into ``NamespaceName``/``TopicName`` with Pulsar's
412 "... is not valid" answers. Deviation from Pulsar: a path or query parameter that is not a
number (``.../skip/abc``) is a 400 here; Jersey answers 404 for those.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

import msgspec
from aiohttp import web

from emubroker.admin.context import CONTEXT, AdminContext
from emubroker.admin.errors import BAD_REQUEST, NOT_FOUND, PRECONDITION_FAILED, RestError
from emubroker.naming import (
    PARTITIONED_TOPIC_SUFFIX,
    InvalidNameError,
    NamespaceName,
    TopicDomain,
    TopicName,
)
from emubroker.policies import to_json

if TYPE_CHECKING:
    from aiohttp.typedefs import Handler

__all__ = [
    "MAX_BODY",
    "context",
    "json_response",
    "max_request_size",
    "namespace_of",
    "no_content",
    "path_int",
    "query_bool",
    "read_body",
    "read_json",
    "redirect_to",
    "topic_of",
    "valid_name",
]

T = TypeVar("T")

MAX_BODY: Final = 1024 * 1024
"""Largest admin request body: every Pulsar admin body (policies, cluster data, a message id)
is a few hundred bytes, so a megabyte is generous and bounds what a client can make us parse."""

_MISSING: Any = object()


async def read_body(request: web.Request, *, what: str = "request body") -> bytes:
    """The whole request body.

    ``StreamReader.read(n)`` answers with what is buffered so far, so the body is read until the
    end of the stream (or one byte past :data:`MAX_BODY`), whatever its transfer encoding.

    Raises:
        RestError: 400 for a body larger than :data:`MAX_BODY`.
    """
    too_large = RestError(BAD_REQUEST, f"{what} is larger than {MAX_BODY} bytes")
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise too_large
    body = bytearray()
    while len(body) <= MAX_BODY:
        chunk = await request.content.read(MAX_BODY + 1 - len(body))
        if not chunk:
            return bytes(body)
        body += chunk
    raise too_large


@web.middleware
async def max_request_size(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Pulsar's ``httpMaxRequestSize`` filter: 400 for a larger or chunked body, before routing.

    With the key above 0, Pulsar's ``MaxRequestSizeFilter`` answers ``Bad Request`` to a
    ``Content-Length`` above it and to any chunked body (its size is unknown up front).
    """
    limit = request.app[CONTEXT].dynamic.config.httpMaxRequestSize
    if limit > 0 and (
        "chunked" in request.headers.get("Transfer-Encoding", "")
        or (request.content_length or 0) > limit
    ):
        raise RestError(BAD_REQUEST, "Bad Request")
    return await handler(request)


async def read_json(
    request: web.Request, kind: type[T], *, what: str = "request body", default: Any = _MISSING
) -> T:
    """Decode the JSON body into ``kind``.

    Args:
        request: The request.
        kind: The msgspec type to decode into (a Struct, ``int``, ``bool``, ``str``...).
        what: Names the body in error reasons.
        default: Returned for an empty body; without it an empty body is a 400.

    Raises:
        RestError: 400 for an empty (without ``default``), oversized, malformed, too deeply
            nested or mistyped body.
    """
    body = await read_body(request, what=what)
    if not body.strip() or body.strip() == b"null":  # JAX-RS hands a JSON null over as null
        if default is _MISSING:
            raise RestError(BAD_REQUEST, f"{what} is required")
        result: T = default
        return result
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as exc:
        raise RestError(BAD_REQUEST, f"Invalid {what}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise RestError(BAD_REQUEST, f"Malformed JSON in {what}: {exc}") from None
    except RecursionError:
        # msgspec's decoder stops at a fixed nesting depth; no admin body nests more than a few.
        raise RestError(BAD_REQUEST, f"Malformed JSON in {what}: nested too deeply") from None


def json_response(value: Any, *, status: int = 200) -> web.Response:
    """A JSON response encoded as Pulsar does (null fields omitted)."""
    return web.Response(body=to_json(value), status=status, content_type="application/json")


def no_content() -> web.Response:
    """The answer of a successful write: 204 without a body."""
    return web.Response(status=204)


def unset_value() -> web.Response:
    """The answer of a GET of an unset policy: Pulsar's null, 200 without a body.

    As Pulsar standalone answers (Content-Length 0, no content type): not 204.
    """
    return web.Response(status=200)


def query_bool(request: web.Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter; like Java's ``Boolean.valueOf``, only ``true`` is true."""
    value = request.query.get(name)
    if value is None or value == "":
        return default
    return value.lower() == "true"


def path_int(request: web.Request, name: str, *, minimum: int | None = None) -> int:
    """An integer path parameter.

    Raises:
        RestError: 404 when it is not an integer (Pulsar's Jersey matches no resource then: a
            ``long`` path parameter that does not convert is a 404), 400 below ``minimum``.
    """
    text = request.match_info[name]
    try:
        value = int(text)
    except ValueError:
        raise RestError(NOT_FOUND, f"Invalid {name} '{text}': not an integer") from None
    if minimum is not None and value < minimum:
        raise RestError(BAD_REQUEST, f"Invalid {name} {value}: must be at least {minimum}")
    return value


def namespace_of(request: web.Request) -> NamespaceName:
    """The ``{tenant}/{namespace}`` of the path.

    Raises:
        RestError: 412 "Namespace name is not valid", as Pulsar's ``validateNamespaceName``.
    """
    tenant, local = request.match_info["tenant"], request.match_info["namespace"]
    try:
        if tenant in _DOT_SEGMENTS or local in _DOT_SEGMENTS:
            raise InvalidNameError(local)
        return NamespaceName(tenant, local)
    except InvalidNameError:
        raise RestError(PRECONDITION_FAILED, "Namespace name is not valid") from None


def topic_of(
    request: web.Request, *, partitioned: bool = False, domain: TopicDomain | None = None
) -> TopicName:
    """The topic of ``/{domain}/{tenant}/{namespace}/{topic}`` paths.

    Args:
        request: The request.
        partitioned: The name must be a partitioned topic's, without ``-partition-``.
        domain: The domain for routes without ``{domain}`` (schemas are persistent's).

    Raises:
        RestError: 412 "Topic name is not valid" (Pulsar's ``validateTopicName``), or 412 for a
            ``-partition-`` name where a partitioned topic is expected.
    """
    info = request.match_info
    domain = domain or TopicDomain(info["domain"])
    try:
        if _DOT_SEGMENTS.intersection((info["tenant"], info["namespace"], info["topic"])):
            raise InvalidNameError(info["topic"])
        namespace = NamespaceName(info["tenant"], info["namespace"])
        name = TopicName(domain, namespace, info["topic"])
    except InvalidNameError:
        raise RestError(PRECONDITION_FAILED, "Topic name is not valid") from None
    if partitioned and PARTITIONED_TOPIC_SUFFIX in name.local_name:
        raise RestError(
            PRECONDITION_FAILED, "Partitioned Topic Name should not contain '-partition-'"
        )
    return name


def context(request: web.Request) -> AdminContext:
    """The broker services the admin app was built with."""
    return request.app[CONTEXT]


_NAME_RE: Final = re.compile(r"[-=:.A-Za-z0-9_]+")
_DOT_SEGMENTS: Final = frozenset({".", ".."})


def valid_name(value: str) -> bool:
    """Pulsar's ``NamedEntity.checkName``: ASCII letters, digits and ``-=:._`` only.

    ``.`` and ``..`` pass Pulsar's pattern but cannot be metadata path segments (ZooKeeper
    rejects them too), so they are refused here.
    """
    return _NAME_RE.fullmatch(value) is not None and value not in _DOT_SEGMENTS


def redirect_to(request: web.Request, base_url: str, **query: str) -> web.HTTPTemporaryRedirect:
    """307 to the same path and query on ``base_url``'s scheme, host and port.

    Args:
        request: The request to send elsewhere.
        base_url: Where to: only its scheme, host and port are used.
        query: Query parameters to set (replacing the request's).
    """
    target = urlsplit(base_url)
    url = (
        request.url.with_scheme(target.scheme or "http")
        .with_host(target.hostname or "")
        .with_port(target.port)
    )
    return web.HTTPTemporaryRedirect(url.update_query(query) if query else url)
