"""Admin routes registered at start from ``ROUTE_RULES``, their handlers loaded at first use.

A starting broker registers every route (the security middleware finds a request's rule by the
matched route's canonical path, so each must be matched by aiohttp), but it need not import the
``routes_*`` modules that handle them: with their helpers they are ~30 modules and ~12 ms of a
start's CPU (docs/performance.md). So the routes are read from ``ROUTE_RULES``, the one list of
served routes, each with :func:`_dispatch` as its handler; the first request to any of them
imports the modules of :data:`ROUTE_MODULES`, collects their handlers by calling their own
``add_routes`` on a recorder, and every request then calls its route's handler.
``tests/emubroker/admin/test_routing.py`` checks that the modules register exactly the routes of
``ROUTE_RULES``, with the same paths and patterns.

A path with variables is a :class:`PatternResource`: aiohttp's ``DynamicResource`` whose regular
expression is compiled when a request is first matched against it, not when it is registered
(aiohttp compiles one per path: ~15 ms of a start's CPU for the ~110 paths with variables).
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import TYPE_CHECKING, Any, Final, cast

from aiohttp import web

from emubroker.admin.access import ROUTE_RULES

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

__all__ = [
    "ROUTE_MODULES",
    "PatternResource",
    "add_routes",
    "compile_patterns",
    "handlers",
    "route_path",
]

ROUTE_MODULES: Final = (
    "routes_brokers",
    "routes_broker_stats",
    "routes_clusters",
    "routes_tenants",
    "routes_namespaces",
    "routes_namespace_policies",
    "routes_placement_policies",
    "routes_failure_domains",
    "routes_unload",
    "routes_bundles",
    "routes_permissions",
    "routes_topic_properties",
    "routes_topics",
    "routes_partitioned",
    "routes_dispatch_rate",
    "routes_limits",
    "routes_backlog_quota",
    "routes_topic_policies",
    "routes_subscriptions",
    "routes_messages",
    "routes_termination",
    "routes_schemas",
    "routes_lookup",
    "routes_dashboard",
    "routes_metrics",
)
"""The modules of ``emubroker.admin`` whose ``add_routes(app)`` register the handlers."""

# The path variables that the routes modules constrain with a pattern (``{name:regex}``):
# ``ROUTE_RULES`` holds canonical paths (aiohttp's, without patterns), aiohttp matches these.
_CONSTRAINED: Final = (
    ("/admin/v2/{domain}/", "/admin/v2/{domain:persistent|non-persistent}/"),
    ("/lookup/v2/topic/{domain}/", "/lookup/v2/topic/{domain:persistent|non-persistent}/"),
    # A dynamic configuration value may hold "/" (a JSON map of URLs): the rest of the path.
    ("/brokers/configuration/{key}/{value}", "/brokers/configuration/{key}/{value:.+}"),
)

_PATTERN: Final = re.compile(r"\{(\w+):[^}]*\}")
_VARIABLE: Final = re.compile(r"\{(\w+)(?::([^}]*))?\}")
_SEGMENT: Final = "[^{}/]+"  # what a variable without a pattern matches: aiohttp's GOOD


class PatternResource(web.DynamicResource):
    """aiohttp's resource of a path with variables, its expression compiled at first match.

    The same expression as ``DynamicResource(path)``'s (a test compares them for every route);
    only ``__init__``, which compiles it there, is replaced.
    """

    def __init__(self, path: str) -> None:
        web.Resource.__init__(self)  # not DynamicResource's: it compiles
        self._orig_path = path
        self._formatter = _canonical(path)
        source = []
        position = 0
        for variable in _VARIABLE.finditer(path):
            source.append(re.escape(path[position : variable.start()]))
            name, pattern = variable.groups()
            source.append(f"(?P<{name}>{pattern or _SEGMENT})")
            position = variable.end()
        source.append(re.escape(path[position:]))
        self._source = "".join(source)
        self._compiled: re.Pattern[str] | None = None

    @property  # DynamicResource sets an attribute of this name
    def _pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source)
        return self._compiled

    @_pattern.setter
    def _pattern(self, compiled: re.Pattern[str]) -> None:  # DynamicResource.add_prefix
        self._compiled = compiled


def route_path(canonical: str) -> str:
    """The path aiohttp registers for a canonical path of ``ROUTE_RULES``, patterns included."""
    for plain, constrained in _CONSTRAINED:
        canonical = canonical.replace(plain, constrained)
    return canonical


def _canonical(path: str) -> str:
    return _PATTERN.sub(r"{\1}", path)


def add_routes(app: web.Application) -> None:
    """Register every route of ``ROUTE_RULES``, in its order, each path once."""
    methods: dict[str, list[str]] = {}
    for method, canonical in ROUTE_RULES:
        methods.setdefault(canonical, []).append(method)
    router = app.router
    for canonical, listed in methods.items():
        path = route_path(canonical)
        resource: web.Resource
        if "{" in path:
            resource = PatternResource(path)
            router.register_resource(resource)
        else:
            resource = router.add_resource(path)
        for method in listed:
            if method == "GET":
                resource.add_route("HEAD", _dispatch)  # as router.add_get does
            resource.add_route(method, _dispatch)


def compile_patterns(app: web.Application) -> None:
    """Compile now the expressions of ``app``'s routes that :class:`PatternResource` defers."""
    for resource in app.router.resources():
        if isinstance(resource, PatternResource):
            resource.get_info()  # reads the compiled expression


async def _dispatch(request: web.Request) -> web.StreamResponse:
    route = request.match_info.route
    assert route.resource is not None  # a route of add_routes
    method = "GET" if route.method == "HEAD" else route.method
    return await handlers()[(method, route.resource.canonical)].handler(request)


class Recorded:
    """A handler and the path its module registered it on."""

    __slots__ = ("handler", "path")

    def __init__(self, handler: Handler, path: str) -> None:
        self.handler = handler
        self.path = path


class _Recorder:
    """Stands for the application in the modules' ``add_routes``: records, registers nothing."""

    def __init__(self) -> None:
        self.router = self
        self.recorded: dict[tuple[str, str], Recorded] = {}

    def add_route(self, method: str, path: str, handler: Handler, **_: Any) -> None:
        key = (method, _canonical(path))
        if key in self.recorded:
            raise ValueError(f"{method} {path} is registered twice")
        self.recorded[key] = Recorded(handler, path)

    def add_get(self, path: str, handler: Handler, **_: Any) -> None:
        self.add_route("GET", path, handler)

    def add_put(self, path: str, handler: Handler, **_: Any) -> None:
        self.add_route("PUT", path, handler)

    def add_post(self, path: str, handler: Handler, **_: Any) -> None:
        self.add_route("POST", path, handler)

    def add_delete(self, path: str, handler: Handler, **_: Any) -> None:
        self.add_route("DELETE", path, handler)


@functools.cache
def handlers() -> dict[tuple[str, str], Recorded]:
    """Every route's handler by ``(method, canonical path)``: imports the routes modules."""
    recorder = _Recorder()
    for name in ROUTE_MODULES:
        module = importlib.import_module(f"emubroker.admin.{name}")
        module.add_routes(cast("web.Application", recorder))
    return recorder.recorded
