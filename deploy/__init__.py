"""Deployment manifests generated from the project's own sources (see generate.py)."""
