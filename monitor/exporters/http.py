"""The monitor's HTTP server (aiohttp): /metrics, /api/status, /healthz and the status page at /.

- ``/metrics``: Prometheus text format, rendered on the event loop in short steps
  (monitor.exporters.prometheus.render_on_loop), so a large exposition never blocks it.
- ``/api/status``: the Evaluation as JSON (monitor.exporters.api);
  ``?detail=partitions`` lists every partition, ``?top=N`` sizes the top list.
  HTTP 200 whatever the replication status: the status is in the body.
- ``/api/history``: the monitor's history of each flow (``monitor.history``): lag in
  seconds and records and throughput over the last hours, the status page's charts.
- ``/healthz``: the monitor itself: 200 while evaluations are fresh, 503 when the
  evaluator has not run for three intervals. Cluster trouble never fails it.
- ``/``: the status page (``monitor.exporters.page``), rendered from the
  /api/status document and the flows' history.

With ``--web-config-file`` (sparkmirror.webconfig) every path asks for basic auth
except ``/healthz``: liveness probes and load balancers rarely carry
credentials, and its body (evaluation age, uptime) tells nothing about the
clusters. TLS, when configured, covers every path including /healthz.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from monitor.evaluator.results import Evaluation
from monitor.exporters import page
from monitor.exporters.api import status_document
from monitor.exporters.prometheus import CONTENT_TYPE, Exposition, render_on_loop
from monitor.history import History
from sparkmirror.webauth import aiohttp_basic_auth
from sparkmirror.webreload import CredentialCheck, LiveWebConfig

log = logging.getLogger(__name__)


@dataclass
class HttpSources:
    """What the HTTP server reads. ``evaluation()`` returns a fresh-enough Evaluation (or None)."""

    evaluation: Callable[[], Awaitable[Evaluation | None]]
    registry: Exposition  # the /metrics text (monitor.exporters.prometheus.build_registry)
    healthy: Callable[[], tuple[bool, dict]]
    version: str = ""
    web: LiveWebConfig | None = None  # --web-config-file: basic auth (TLS is the site's)
    history: History | None = None    # the flows' history (/api/history, the status page's charts)


def build_app(sources: HttpSources) -> web.Application:
    async def metrics(_request: web.Request) -> web.Response:
        # before the first evaluation there is nothing to expose: an empty text
        body = b"" if await sources.evaluation() is None else await render_on_loop(sources.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def status(request: web.Request) -> web.Response:
        detail = request.query.get("detail", "summary")
        try:
            top = max(0, int(request.query.get("top", "10")))
        except ValueError:
            raise web.HTTPBadRequest(text="top must be a whole number") from None
        ev = await sources.evaluation()
        # Building and encoding the document reads only the (immutable) Evaluation: a thread
        # keeps a 10,000-partition document from blocking the event loop.
        text = await asyncio.to_thread(
            lambda: json.dumps(status_document(ev, detail, top, sources.version),
                               indent=None if detail == "partitions" else 1))
        return web.Response(text=text, content_type="application/json")

    async def history(_request: web.Request) -> web.Response:
        if sources.history is None:
            return web.json_response({"step_seconds": None, "points_max": 0, "flows": {}})
        doc = sources.history.document()  # a few hundred KB at most: built on the loop, encoded off it
        return web.Response(text=await asyncio.to_thread(json.dumps, doc), content_type="application/json")

    async def healthz(_request: web.Request) -> web.Response:
        ok, info = sources.healthy()
        return web.json_response({"status": "ok" if ok else "unhealthy", **info}, status=200 if ok else 503)

    async def index(request: web.Request) -> web.Response:
        doc = status_document(await sources.evaluation(), "summary", 10, sources.version)
        return await page.handle(request, doc)

    middlewares = ([aiohttp_basic_auth(CredentialCheck(sources.web, log), {healthz})]
                   if sources.web is not None else [])
    app = web.Application(middlewares=middlewares)
    if sources.history is not None:
        app[page.HISTORY] = sources.history
    app.router.add_get("/", index)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/api/status", status)
    app.router.add_get("/api/history", history)
    app.router.add_get("/healthz", healthz)
    return app
