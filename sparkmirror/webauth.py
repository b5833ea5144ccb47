"""Basic auth in front of an HTTP app, for both servers: the monitor's aiohttp app and the
replicator's WSGI /metrics app. The decision (users, bcrypt, logging refusals) is
``webreload.CredentialCheck``'s; this module only adapts it to each server's interface.
"""

from __future__ import annotations

import asyncio

from sparkmirror.webreload import CredentialCheck


def wsgi_basic_auth(app, check: CredentialCheck):
    """The WSGI ``app`` behind ``check``: every path asks for credentials."""

    def guarded(environ, start_response):
        if check.allows(environ.get("HTTP_AUTHORIZATION"), environ.get("PATH_INFO", ""), environ.get("REMOTE_ADDR")):
            return app(environ, start_response)
        start_response(check.STATUS, [("Content-Type", "text/plain; charset=utf-8"), *check.HEADERS.items()])
        return [check.BODY.encode()]

    return guarded


def aiohttp_basic_auth(check: CredentialCheck, open_handlers: set):
    """An aiohttp middleware asking for ``check``'s credentials on every handler but ``open_handlers``."""
    from aiohttp import web

    @web.middleware
    async def require_credentials(request: web.Request, handler):
        # Decided by the handler the router chose, not by the path text: no spelling of a
        # path (%-escapes, dot segments, a trailing slash) reaches another handler without credentials.
        if not check.required or request.match_info.handler in open_handlers:
            return await handler(request)
        # bcrypt takes tens of milliseconds: never on the event loop.
        if await asyncio.to_thread(check.allows, request.headers.get("Authorization"), request.path, request.remote):
            return await handler(request)
        return web.Response(status=401, text=check.BODY, headers=check.HEADERS)

    return require_credentials
