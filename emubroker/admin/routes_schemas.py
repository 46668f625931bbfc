"""``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``: the schema registry over REST.

A thin layer over ``emubroker.schemas`` (Pulsar's ``SchemasResource``): ``GET .../schema[/{v}]``
answers ``GetSchemaResponse`` ``{"version", "type", "timestamp", "data", "properties"}`` (404
"Schema not found"; the C++ client's HTTP lookup turns that into "no schema", spec §13), ``GET
.../schemas`` every live version, ``POST .../schema`` with ``PostSchemaPayload`` ``{"type",
"schema", "properties"}`` registers under the namespace's strategy (422 "Invalid schema
definition data for AVRO schema" when the definition does not parse, ``schemas.validation``;
409 with the reason when incompatible) and answers ``{"version": {"version": n}}``,
``DELETE .../schema[?force=true]`` answers ``{"version": n}``, ``POST .../version`` the live version
equal to a ``PostSchemaPayload`` (``{"version": n}``, -1 for none), ``POST .../compatibility``
``{"compatibility", "schemaCompatibilityStrategy"}``. Schema ids are per partitioned
topic and domain-less, so partitions share their topic's schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from aiohttp import web

from emubroker.admin.errors import (
    BAD_REQUEST,
    CONFLICT,
    NOT_FOUND,
    UNAVAILABLE,
    UNPROCESSABLE,
    RestError,
)
from emubroker.admin.http import context, json_response, path_int, query_bool, read_json, topic_of
from emubroker.naming import TopicDomain
from emubroker.schemas.compat import schema_type_from_name, schema_type_name
from emubroker.schemas.registry import schema_id, version_from_wire
from emubroker.schemas.service import schema_data_of
from emubroker.schemas.validation import InvalidSchemaDataError
from protocol import commands as c
from protocol.commands import SchemaType
from protocol.errors import IncompatibleSchemaError

if TYPE_CHECKING:
    from emubroker.naming import TopicName
    from emubroker.schemas.registry import StoredSchema
    from emubroker.schemas.service import SchemaService

__all__ = ["PostSchemaPayload", "add_routes"]

BASE = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"


class PostSchemaPayload(msgspec.Struct):
    """Pulsar's ``PostSchemaPayload``."""

    type: str
    schema: str = ""
    # JSON null too: the Go admin client sends it for no properties, and Pulsar takes it.
    properties: dict[str, str] | None = None


def _response(stored: StoredSchema) -> dict[str, Any]:
    return {
        "version": stored.version,
        "type": schema_type_name(stored.type),
        "timestamp": stored.timestamp,
        "data": stored.data.decode("utf-8", "replace"),
        "properties": stored.properties,
    }


def _target(
    request: web.Request, missing_namespace: str = "Namespace does not exist"
) -> tuple[SchemaService, TopicName]:
    ctx = context(request)
    name = topic_of(request, domain=TopicDomain.PERSISTENT)
    if not ctx.namespaces.exists(name.namespace):
        raise RestError(NOT_FOUND, missing_namespace)
    if ctx.schemas is None:
        raise RestError(UNAVAILABLE, "The schema registry is not available on this broker")
    return ctx.schemas, name


async def get_schema(request: web.Request) -> web.Response:
    """``GET BASE/schema[/{version}]``."""
    # Pulsar looks the schema up without checking the namespace (Pulsar 4.0.7 standalone's answer).
    service, name = _target(request, missing_namespace="Schema not found")
    version = path_int(request, "version", minimum=0) if "version" in request.match_info else None
    stored = await service.registry.get(name, version)
    if stored is None:
        raise RestError(NOT_FOUND, "Schema not found")
    return json_response(_response(stored))


async def get_schemas(request: web.Request) -> web.Response:
    """``GET BASE/schemas``: every live version, oldest first."""
    service, name = _target(request)
    versions = await service.registry.versions(name)
    return json_response({"getSchemaResponses": [_response(s) for s in versions]})


async def _posted_schema(request: web.Request) -> tuple[SchemaService, TopicName, c.Schema]:
    """The target and the ``PostSchemaPayload`` of a POST, as a wire ``Schema``."""
    payload = await read_json(request, PostSchemaPayload, what="schema payload")
    service, name = _target(request)
    try:
        schema_type = schema_type_from_name(payload.type)
    except ValueError:
        raise RestError(BAD_REQUEST, f"Invalid schema type '{payload.type}'") from None
    schema = c.Schema(
        name=schema_id(name),
        schema_data=payload.schema.encode(),
        type=schema_type,
        properties=tuple(
            c.KeyValue(key=k, value=v) for k, v in sorted((payload.properties or {}).items())
        ),
    )
    return service, name, schema


async def post_schema(request: web.Request) -> web.Response:
    """``POST BASE/schema``: register a version (or find the equal one)."""
    service, name, schema = await _posted_schema(request)
    if schema.type is SchemaType.NONE:
        raise RestError(BAD_REQUEST, "A BYTES schema is no schema: nothing to register")
    try:
        version = version_from_wire(await service.get_or_create(name, schema))
    except InvalidSchemaDataError as exc:
        raise RestError(UNPROCESSABLE, exc.message) from None
    except IncompatibleSchemaError as exc:
        raise RestError(CONFLICT, exc.message) from None
    return json_response({"version": {"version": version}})


async def post_version(request: web.Request) -> web.Response:
    """``POST BASE/version``: the live version equal to the payload's schema (-1 for none)."""
    service, name, schema = await _posted_schema(request)
    version = await service.registry.version_of(name, schema_data_of(schema))
    return json_response({"version": -1 if version is None else version})


async def post_compatibility(request: web.Request) -> web.Response:
    """``POST BASE/compatibility``: could the payload's schema be registered now (202)."""
    service, name, schema = await _posted_schema(request)
    compatible, strategy = await service.compatibility(name, schema_data_of(schema))
    return json_response(
        {"compatibility": compatible, "schemaCompatibilityStrategy": strategy.value}, status=202
    )


async def delete_schema(request: web.Request) -> web.Response:
    """``DELETE BASE/schema[?force=true]``."""
    service, name = _target(request)
    version = await service.registry.delete(name, force=query_bool(request, "force"))
    return json_response({"version": -1 if version is None else version})


def add_routes(app: web.Application) -> None:
    """Register the schema routes."""
    router = app.router
    router.add_get(f"{BASE}/schema", get_schema)
    router.add_get(f"{BASE}/schema/{{version}}", get_schema)
    router.add_get(f"{BASE}/schemas", get_schemas)
    router.add_post(f"{BASE}/schema", post_schema)
    router.add_post(f"{BASE}/version", post_version)
    router.add_post(f"{BASE}/compatibility", post_compatibility)
    router.add_delete(f"{BASE}/schema", delete_schema)
