"""Exporters: Prometheus, OpenTelemetry and the HTTP API. They only read Evaluations."""
