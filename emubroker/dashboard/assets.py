"""The page's own files (HTML, CSS, JavaScript) from package data, and the routes serving them.

The page is ``/dashboard/`` and its files ``/dashboard/static/<name>``; only the files listed in
:data:`ASSETS` are served (no path from the request ever reaches the file system). No
third-party script, font or stylesheet: everything the page draws is in these three files.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Final

from aiohttp import web

__all__ = ["ASSETS", "add_page_routes", "asset"]

ASSETS: Final = {
    "index.html": "text/html",
    "dashboard.css": "text/css",
    "dashboard.js": "text/javascript",
}
"""Every file of the page, with its content type."""

# The browser asks for the files again on every load: a page served by a broker upgraded in
# place must not run yesterday's script against today's JSON.
_NO_CACHE: Final = {"Cache-Control": "no-cache"}


@functools.cache
def asset(name: str) -> bytes:
    """One file of the page (read once).

    Raises:
        KeyError: Not one of :data:`ASSETS`.
    """
    if name not in ASSETS:
        raise KeyError(name)
    return (resources.files("emubroker.dashboard") / "static" / name).read_bytes()


def _file(name: str) -> web.Response:
    return web.Response(
        body=asset(name), content_type=ASSETS[name], charset="utf-8", headers=_NO_CACHE
    )


async def _index(request: web.Request) -> web.Response:
    return _file("index.html")


async def _static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in ASSETS:
        raise web.HTTPNotFound(text=f"no dashboard file {name!r}")
    return _file(name)


async def _to_index(request: web.Request) -> web.Response:
    raise web.HTTPFound("/dashboard/")


def add_page_routes(app: web.Application) -> None:
    """``/dashboard`` (redirect), ``/dashboard/`` and ``/dashboard/static/{name}``."""
    app.router.add_get("/dashboard", _to_index)
    app.router.add_get("/dashboard/", _index)
    app.router.add_get("/dashboard/static/{name}", _static)
