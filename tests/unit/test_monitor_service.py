"""MonitorService's stages (sparkmirror.lifecycle): started in the documented order, stopped in
reverse, and a start that fails (the port is taken) leaves nothing running."""

from __future__ import annotations

import asyncio
import socket

import pytest

from monitor.service import MonitorService
from monitor.watch import MonitorOptions
from sparkmirror.errors import SparkmirrorError
from sparkmirror.model.parse import parse_config

CONFIG = ("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
          "A->B.enabled = true\n")
STAGES = ["the OpenTelemetry exporter", "the cluster clients", "the reachability checks", "the collectors",
          "the audit", "the evaluator", "the HTTP server"]


def test_the_stages_are_the_documented_order_and_stop_in_reverse():
    import monitor.service

    service = MonitorService(parse_config(CONFIG), MonitorOptions(port=0, timeout=1.0))
    assert service._stages.names == STAGES
    doc = monitor.service.__doc__
    documented = doc[doc.index("``start()``"):doc.index("``stop()``")]
    at = [documented.index(what) for what in ("OpenTelemetry exporter", "ClusterClient", "HealthCollector",
                                              "HeartbeatCollector", "AuditEngine", "evaluator loop", "aiohttp server")]
    assert at == sorted(at), "the stages' order and the docstring's differ"

    async def run():
        await service.start()
        assert service._stages.started == STAGES and service.port
        tails = list(service._stages._entries[3].component.tails)
        assert tails and all(t.tail._thread.is_alive() for t in tails)
        await service.stop()
        assert service._stages.started == []
        assert not any(t.tail._thread.is_alive() for t in tails)
        assert all(c._executor._shutdown for c in service.clients.values())
        # the audit's round thread ended before its readers closed
        assert service.audit.engines and not any(t.is_alive() for t in service.audit._running.values())

    asyncio.run(run())


def test_a_taken_port_unwinds_the_stages_already_started():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        service = MonitorService(parse_config(CONFIG), MonitorOptions(port=taken.getsockname()[1], timeout=1.0))

        async def run():
            with pytest.raises(SparkmirrorError, match="cannot listen on"):
                await service.start()

        asyncio.run(run())
    finally:
        taken.close()
    assert service._stages.started == [] and service._runner is None
    assert service.clients and all(c._executor._shutdown for c in service.clients.values())


def test_a_web_config_adds_its_reload_as_the_last_stage(tmp_path):
    from sparkmirror.webconfig import load_web_config

    web = tmp_path / "web.yml"
    web.write_text("{}\n")
    service = MonitorService(parse_config(CONFIG), MonitorOptions(web_config=load_web_config(str(web))))
    assert service._stages.names == [*STAGES, "the web config reload"]
