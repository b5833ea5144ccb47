"""Grafana dashboards for sparkmirror, as code (grafanalib).

``queries`` holds every PromQL expression the panels show, built from the
metric specs in ``sparkmirror.metrics``; ``overview`` and ``drilldown`` lay the
panels out; ``python -m dashboards.generate`` writes ``dashboards/json/*.json``,
which Grafana imports or provisions (``dashboards/provisioning/``).
"""
