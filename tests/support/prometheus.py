"""Real Prometheus and Alertmanager (Debian's binaries) and a webhook pager for tests.

- ``PrometheusServer``: a generated config scraping the given targets and loading
  the given rule files, short scrape and evaluation intervals, its own temporary
  directory and a free loopback port; ``query()`` evaluates PromQL through the
  HTTP API and raises ``PromQLError`` with Prometheus' message.
- ``AlertmanagerServer``: routes every alert to one webhook URL, with short
  group timers and clustering off; ``AlertmanagerServer.shipped()`` runs the
  committed alerts/alertmanager.yml as it is (routes, grouping, timers,
  inhibition) with each of its receivers pointed at the webhook (a
  notification's ``receiver`` says which).
- ``WebhookReceiver`` (fixture ``webhook_receiver``): a tiny aiohttp server in a
  thread that records every Alertmanager notification with its arrival time.
- ``require_binary()``: the path of promtool/prometheus/alertmanager, or a test
  FAILURE saying how to install them (CI installs them; a missing binary must
  not turn into a silent skip).
- ``MonitorProcess``: ``sparkmirror monitor`` as a child process on a free port,
  the target Prometheus scrapes in the live tests (ready when /healthz answers);
  with ``web_config`` (and ``ca_file``/``auth`` for its own requests) over TLS
  and basic auth.

Every process is started in its own session and stopped (TERM, then KILL) by
``stop()``, also when a test fails; use them as context managers or fixtures.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from devenv.kafka import free_port
from tests.support.waiting import wait_until
from tests.support.web import fetch

#: The Alertmanager config the project ships (docker-compose, docs/alerts.md).
SHIPPED_ALERTMANAGER = Path(__file__).resolve().parents[2] / "alerts" / "alertmanager.yml"

INSTALL_HINT = "install it with scripts/install-system-deps.sh (Debian packages prometheus, prometheus-alertmanager)"

#: Debian installs Alertmanager as prometheus-alertmanager; upstream tarballs as alertmanager.
BINARIES = {
    "promtool": ("promtool",),
    "prometheus": ("prometheus",),
    "alertmanager": ("prometheus-alertmanager", "alertmanager"),
    "amtool": ("amtool",),
}


def find_binary(name: str) -> str | None:
    for candidate in BINARIES.get(name, (name,)):
        path = shutil.which(candidate) or (f"/usr/bin/{candidate}" if os.access(f"/usr/bin/{candidate}", os.X_OK)
                                           else None)
        if path:
            return path
    return None


def require_binary(name: str) -> str:
    """Path of a Prometheus tool; fails (never skips) the calling test when it is missing."""
    path = find_binary(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH or in /usr/bin: {INSTALL_HINT}", pytrace=False)
    return path


class PromQLError(Exception):
    """Prometheus rejected a query (bad_data for a parse error) or could not run it."""


class _Process:
    """A server process with a log file, a readiness URL and a clean stop."""

    name = "process"
    ready_path = "/-/ready"
    ssl_context = None  # set for a server that speaks TLS (trusting its CA)

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{self.name}.log"
        self.env: dict[str, str] = {}  # extra environment of the process
        self._proc: subprocess.Popen | None = None
        self._log = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 30.0):
        self._log = open(self.log_path, "ab")
        env = dict(os.environ, **self.env) if self.env else None
        self._proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.workdir, env=env)
        proc = self._proc

        def ready() -> bool:
            with urllib.request.urlopen(self.url + self.ready_path, timeout=1, context=self.ssl_context) as resp:
                return resp.status == 200

        def details() -> str:
            code = proc.poll()
            return f"{self.name}: {'running' if code is None else f'exited with {code}'}; log:\n{self.log_tail()}"

        try:
            wait_until(ready, timeout, interval=0.1, what=f"{self.name} ready at {self.url}{self.ready_path}",
                       ignoring=(urllib.error.URLError, ConnectionError, TimeoutError),
                       alive=lambda: proc.poll() is None, details=details)
        except AssertionError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self):
        return self.start() if not self.running else self

    def __exit__(self, *exc) -> None:
        self.stop()


class MonitorProcess(_Process):
    """``sparkmirror monitor CONFIG --listen 127.0.0.1:<free port> [ARGS...]``; ``stop()`` sends SIGTERM."""

    name = "monitor"
    ready_path = "/healthz"

    def __init__(self, workdir: Path, config: Path, *args: str, verbose: bool = False,
                 web_config: Path | None = None, ca_file: Path | None = None,
                 auth: tuple[str, str] | None = None, env: dict[str, str] | None = None) -> None:
        super().__init__(workdir)
        self.config, self.args = Path(config), list(args)
        self.env = dict(env or {})
        self.address = f"127.0.0.1:{self.port}"
        self.verbose = verbose  # sparkmirror -v: debug logging, librdkafka's own lines included
        self.web_config = web_config  # --web-config-file; ca_file: trust its TLS certificate; auth: (user, password)
        if ca_file is not None:
            import ssl

            self.ssl_context = ssl.create_default_context(cafile=str(ca_file))
            self.url = f"https://127.0.0.1:{self.port}"
        self.auth = auth

    def command(self) -> list[str]:
        web = ["--web-config-file", str(self.web_config)] if self.web_config else []
        return [sys.executable, "-m", "sparkmirror_cli.main", *(["-v"] if self.verbose else []), "monitor",
                str(self.config), "--listen", self.address, *web, *self.args]

    def request(self, path: str, auth: tuple[str, str] | None = None) -> urllib.request.Request:
        """A GET of ``path`` with basic auth (``auth``, else the process's own credentials, if any)."""
        import base64

        req = urllib.request.Request(self.url + path)
        user_password = auth or self.auth
        if user_password:
            token = base64.b64encode(":".join(user_password).encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        return req

    def get(self, path: str, timeout: float = 10.0) -> bytes:
        with urllib.request.urlopen(self.request(path), timeout=timeout, context=self.ssl_context) as resp:
            return resp.read()

    def status(self) -> dict:
        return json.loads(self.get("/api/status"))

    def wait_for(self, predicate: Callable[[dict], object], timeout: float, what: str):
        """Poll /api/status until ``predicate(status)`` is truthy; return its value or fail naming ``what``.
        A predicate that finds a key, an item or a flow missing (KeyError, IndexError, TypeError,
        StopIteration) means "not there yet"."""
        last: list[dict] = []

        def holds():
            if not self.running:  # before asking: a monitor that exited answers no request
                raise AssertionError(f"monitor exited while waiting for {what}:\n{self.log_tail()}")
            last[:] = [self.status()]
            return predicate(last[0])

        def details() -> str:
            return f"last status:\n{json.dumps(last[0] if last else {}, indent=1)[:4000]}\nlog:\n{self.log_tail()}"

        return wait_until(holds, timeout, interval=0.5, what=what, details=details,
                          ignoring=(KeyError, IndexError, TypeError, StopIteration))


class AlertmanagerServer(_Process):
    """Alertmanager sending every alert (and its resolution) to ``webhook_url``."""

    name = "alertmanager"

    def __init__(self, workdir: Path, webhook_url: str, group_by: tuple[str, ...] = ("alertname", "flow"),
                 group_wait: str = "1s", group_interval: str = "1s", repeat_interval: str = "1h",
                 inhibit_rules: list[dict] | None = None, config: dict | None = None) -> None:
        """``inhibit_rules``: e.g. those of the committed alerts/alertmanager.yml; ``config``: a whole
        Alertmanager config instead (see ``shipped()``)."""
        super().__init__(workdir)
        self.config_path = workdir / "alertmanager.yml"
        self.config_path.write_text(yaml.safe_dump(config or {
            "route": {
                "receiver": "webhook", "group_by": list(group_by), "group_wait": group_wait,
                "group_interval": group_interval, "repeat_interval": repeat_interval,
            },
            "inhibit_rules": inhibit_rules or [],
            "receivers": [{"name": "webhook", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}],
        }, sort_keys=False))

    @classmethod
    def shipped(cls, workdir: Path, webhook_url: str, path: Path = SHIPPED_ALERTMANAGER) -> "AlertmanagerServer":
        """The committed config unchanged but for its receivers, each a webhook to ``webhook_url``."""
        config = yaml.safe_load(path.read_text())
        config["receivers"] = [{"name": r["name"], "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}
                               for r in config["receivers"]]
        return cls(workdir, webhook_url, config=config)

    def alerts(self) -> list[dict]:
        """Alertmanager's alerts (API v2), with their status: ``state`` active or suppressed, and
        ``inhibitedBy``."""
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts", timeout=10) as response:
            return json.loads(response.read())

    def groups(self) -> list[dict]:
        """Alertmanager's alert groups (API v2): ``labels`` (the group's), ``receiver`` and ``alerts``."""
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts/groups", timeout=10) as response:
            return json.loads(response.read())

    def command(self) -> list[str]:
        return [
            require_binary("alertmanager"), f"--config.file={self.config_path}",
            f"--storage.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",  # no HA gossip port
            "--log.level=info",
        ]


class PrometheusServer(_Process):
    """Prometheus scraping ``targets`` (job name -> ["host:port", ...]) and evaluating ``rule_files``."""

    name = "prometheus"

    def __init__(self, workdir: Path, targets: dict[str, list[str]], rule_files: list[Path] = (),
                 alertmanager: str | list[str] | None = None, scrape_interval: str = "1s",
                 evaluation_interval: str = "1s", scrape_options: dict[str, dict] | None = None) -> None:
        """``alertmanager``: the URL of one, or several (each gets every alert);
        ``scrape_options``: per job, more scrape_config settings (``scheme``, ``tls_config``, ``basic_auth``)."""
        super().__init__(workdir)
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        config: dict = {
            "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                       "evaluation_interval": evaluation_interval},
            "rule_files": [str(Path(p).resolve()) for p in rule_files],
            "scrape_configs": [
                {"job_name": job, **(scrape_options or {}).get(job, {}),
                 "static_configs": [{"targets": list(addresses)}]}
                for job, addresses in targets.items()
            ],
        }
        if alertmanager:
            urls = [alertmanager] if isinstance(alertmanager, str) else list(alertmanager)
            hosts = [urllib.parse.urlparse(url).netloc for url in urls]
            config["alerting"] = {"alertmanagers": [{"api_version": "v2", "static_configs": [{"targets": hosts}]}]}
        self.config_path = workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    def command(self) -> list[str]:
        return [
            require_binary("prometheus"), f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=1h", "--log.level=info",
        ]

    # --- HTTP API ---------------------------------------------------------------
    def api(self, path: str, **params) -> dict:
        """GET /api/v1/<path>; returns ``data`` or raises PromQLError with Prometheus' error."""
        query = urllib.parse.urlencode(params, doseq=True)
        resp = fetch(f"{self.url}/api/v1/{path}?{query}")
        body = json.loads(resp.body or b"{}")  # 400/422 carry Prometheus' JSON error
        if body.get("status") != "success":
            raise PromQLError(f"{body.get('errorType', 'error')}: {body.get('error', body)}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """Instant query: the result list (``[{"metric": {...}, "value": [t, "v"]}, ...]``)."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", **params)
        result = data["result"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": result}]
        return result

    def wait_for_data(self, expr: str, timeout: float = 20.0) -> list[dict]:
        """Poll ``expr`` until it returns at least one sample; raise on a parse error at once."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.25)

    def label_values(self, label: str, selector: str) -> list[str]:
        return self.api(f"label/{label}/values", **{"match[]": selector})

    def rules(self) -> list[dict]:
        """Every loaded rule with its health, state and last error."""
        return [r for group in self.api("rules")["groups"] for r in group["rules"]]

    def targets_up(self) -> dict[str, str]:
        return {t["scrapeUrl"]: t["health"] for t in self.api("targets")["activeTargets"]}


@dataclass
class Notification:
    received_at: float  # time.time()
    received_monotonic: float
    payload: dict

    @property
    def status(self) -> str:
        return self.payload.get("status", "")

    @property
    def receiver(self) -> str:
        """The Alertmanager receiver the notification went to (pager, tickets, info in the shipped config)."""
        return self.payload.get("receiver", "")

    @property
    def group_labels(self) -> dict:
        return self.payload.get("groupLabels", {})

    def alerts(self, **labels: str) -> list[dict]:
        return [a for a in self.payload.get("alerts", [])
                if all(a.get("labels", {}).get(k) == v for k, v in labels.items())]


@dataclass
class WebhookReceiver:
    """Records every POST (Alertmanager webhook notifications) in ``notifications``."""

    host: str = "127.0.0.1"
    notifications: list[Notification] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> "WebhookReceiver":
        from aiohttp import web

        ready = threading.Event()
        errors: list[BaseException] = []

        async def handle(request: web.Request) -> web.Response:
            payload = await request.json()
            with self._cond:
                self.notifications.append(Notification(time.time(), time.monotonic(), payload))
                self._cond.notify_all()
            return web.Response(text="ok")

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            app = web.Application()
            app.router.add_post("/{tail:.*}", handle)
            runner = web.AppRunner(app)
            try:
                loop.run_until_complete(runner.setup())
                site = web.TCPSite(runner, self.host, 0)
                loop.run_until_complete(site.start())
                port = runner.addresses[0][1]
                self.url = f"http://{self.host}:{port}/alerts"
            except BaseException as exc:  # reported to start()
                errors.append(exc)
                ready.set()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(runner.cleanup())
                loop.close()

        self._thread = threading.Thread(target=run, name="webhook-receiver", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop = self._thread = None

    def wait_for(self, predicate: Callable[[Notification], bool], timeout: float,
                 after: float = 0.0) -> Notification | None:
        """The first notification received at or after ``after`` (monotonic) matching ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for n in self.notifications:
                    if n.received_monotonic >= after and predicate(n):
                        return n
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)


@pytest.fixture
def webhook_receiver():
    receiver = WebhookReceiver().start()
    try:
        yield receiver
    finally:
        receiver.stop()
