"""The replicator's /metrics: its own figures, served on the driver for Prometheus and the monitor.

The data path (batches, records, catch-up) and the control plane (heartbeats sent) both
report into the one process-wide ``metrics()``; replicator.service starts serving it.

Per flow: batches, records, bytes, offset-syncs written, the duration of each
batch and the newest source-to-target latency. Names come from sparkmirror.metrics,
the one list of every metric sparkmirror exports. ``--metrics-listen`` (default
127.0.0.1:9465) chooses the address; ``off`` disables it. ``--web-config-file``
(sparkmirror.webconfig, the format the monitor reads too) adds TLS and basic
auth; then every path asks for credentials (there is no /healthz here).

prometheus_client's own ``start_http_server`` has TLS but no basic auth, so the
same WSGI app is served here behind a small credentials check, with the TLS
handshake done in each connection's thread (a client that never finishes its
handshake holds only its own thread, not the accept loop).
"""

from __future__ import annotations

import logging
import socket
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from sparkmirror import metrics as m
from sparkmirror.errors import UsageError

log = logging.getLogger("sparkmirror.replicate")

class _QuietHandler(WSGIRequestHandler):
    timeout = 60  # seconds: a client that connects and says nothing (or never finishes TLS) gives its thread back

    def log_message(self, *args) -> None:  # no access log on stderr
        pass


def _server_class(host: str, port: int, live):
    """``live``: a sparkmirror.webreload.LiveWebConfig, or None for plain HTTP without auth."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

    class Server(ThreadingWSGIServer):
        address_family = family

        def get_request(self):
            conn, addr = super().get_request()
            if live is not None:
                loaded = live.poll()  # the web config file changed? (at most one stat round a second)
                if loaded is not None:
                    live.apply(loaded)  # here: the thread that makes every connection's TLS object
                if live.ssl_context is not None:
                    conn = live.ssl_context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
            return conn, addr

        def handle_error(self, request, client_address) -> None:
            # A plain-HTTP request to the TLS port, a client that hangs up: nothing to print a traceback for.
            log.debug("metrics request from %s failed", client_address[0], exc_info=True)

    return Server


class ReplicatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        #: Set by ``sparkmirror replicate --web-config-file`` before the service starts serving.
        self.web_config = None
        #: The control API's controller (replicator.api), set by the service before it serves.
        self.controller = None
        self.server = None
        r = self.registry

        def counter(spec):
            return Counter(spec.base_name, spec.help, spec.labels, registry=r)

        def gauge(spec):
            return Gauge(spec.name, spec.help, spec.labels, registry=r)

        self.batches = counter(m.REPLICATOR_BATCHES)
        self.records = counter(m.REPLICATOR_RECORDS)
        self.records_lost = counter(m.REPLICATOR_RECORDS_LOST)
        self.bytes = counter(m.REPLICATOR_BYTES)
        self.offset_syncs = counter(m.REPLICATOR_OFFSET_SYNCS)
        self.heartbeats = counter(m.REPLICATOR_HEARTBEATS_SENT)
        self.batch_duration = Histogram(m.REPLICATOR_BATCH_DURATION.name, m.REPLICATOR_BATCH_DURATION.help,
                                        m.REPLICATOR_BATCH_DURATION.labels,
                                        buckets=m.REPLICATOR_BATCH_DURATION.buckets, registry=r)
        self.latency = gauge(m.REPLICATOR_LATENCY_MAX)
        self.last_batch = gauge(m.REPLICATOR_LAST_BATCH)
        self.partitions = gauge(m.REPLICATOR_PARTITIONS)
        self.backlog = gauge(m.REPLICATOR_BACKLOG)
        self.catchup_eta = gauge(m.REPLICATOR_CATCHUP_ETA)
        self.paused = gauge(m.REPLICATOR_FLOW_PAUSED)
        self.paused_since = gauge(m.REPLICATOR_FLOW_PAUSED_SINCE)

    def serve(self, listen: tuple[str, int] | None) -> None:
        if listen is None:
            return
        from replicator import api

        host, port = listen
        live = None
        if self.web_config is not None:
            from sparkmirror.webreload import LiveWebConfig

            live = LiveWebConfig(self.web_config)
        control = api.ControlApp(self.controller, host, live) if self.controller is not None else None
        app = api.dispatch(make_wsgi_app(self.registry), control)
        if live is not None:
            from sparkmirror.webauth import wsgi_basic_auth
            from sparkmirror.webreload import CredentialCheck

            app = wsgi_basic_auth(app, CredentialCheck(live, log))
        try:
            self.server = make_server(host, port, app, _server_class(host, port, live), handler_class=_QuietHandler)
        except OSError as exc:
            raise UsageError(f"cannot serve replicator metrics on {host}:{port}: {exc.strerror}",
                             hint="choose another --metrics-listen HOST:PORT, or 'off'") from None
        threading.Thread(target=self.server.serve_forever, name="replicator-metrics", daemon=True).start()
        log.info("replicator metrics on %s://%s:%d/metrics%s", live.scheme if live else "http", host,
                 self.server.server_address[1], " with basic auth" if live and live.auth else "")
        refusal = api.transport_refusal(host, live) if control is not None else None
        if refusal:
            log.warning("control API: pause, resume and reload are refused: %s", refusal)

    def batch(self, flow: str, records: int, nbytes: int, syncs: int, seconds: float, max_latency_ms: int,
              finished_at: float) -> None:
        self.batch_done(flow, seconds)
        self.copied(flow, records, nbytes, syncs, max_latency_ms, finished_at)

    def batch_done(self, flow: str, seconds: float) -> None:
        """A batch committed (micro-batch, or a real-time query's checkpoint interval)."""
        self.batches.labels(flow).inc()
        self.batch_duration.labels(flow).observe(seconds)

    def copied(self, flow: str, records: int, nbytes: int, syncs: int, max_latency_ms: int, at: float) -> None:
        """Records written to the target (per batch, or every half second in real time)."""
        self.records.labels(flow).inc(records)
        self.bytes.labels(flow).inc(nbytes)
        self.offset_syncs.labels(flow).inc(syncs)
        if records:
            self.latency.labels(flow).set(max_latency_ms / 1000)
        self.last_batch.labels(flow).set(at)


    def started(self, flow: str, partitions: int) -> None:
        """The flow's query runs: its partitions, and its loss and batch series exported at 0 from now
        on, so that the first loss or batch is an increase Prometheus sees (a series born above 0 is
        not one) and the batch panels have data before the first real-time checkpoint, a minute in."""
        self.partitions.labels(flow).set(partitions)
        self.records_lost.labels(flow)
        self.batches.labels(flow)
        self.batch_duration.labels(flow)

    def catchup(self, flow: str, backlog: int, eta: float | None) -> None:
        self.backlog.labels(flow).set(backlog)
        self.catchup_eta.labels(flow).set(float("inf") if eta is None else eta)

    def pause_state(self, flow: str, paused: dict | None) -> None:
        """``paused``: the flow's pause ({"by", "at"}) or None while it runs."""
        self.paused.labels(flow).set(0 if paused is None else 1)
        if paused is None:
            try:
                self.paused_since.remove(flow)
            except KeyError:
                pass
        else:
            self.paused_since.labels(flow).set(float(paused.get("at") or 0))

    def lost(self, flow: str, records: int) -> None:
        self.records_lost.labels(flow).inc(records)


#: The process-wide instance; flows, the catch-up report and heartbeat emitters report into it.
METRICS: ReplicatorMetrics | None = None


def metrics() -> ReplicatorMetrics:
    global METRICS
    if METRICS is None:
        METRICS = ReplicatorMetrics()
    return METRICS
