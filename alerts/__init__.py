"""Prometheus alert rules for sparkmirror, generated from monitor.metrics (see rules.py)."""
