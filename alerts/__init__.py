"""Prometheus alert rules for sparkmirror, generated from sparkmirror.metrics (see rules.py)."""
