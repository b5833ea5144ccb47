"""PromQL building blocks over ``sparkmirror.metrics`` that the alert rules and the dashboards share.

The rules (alerts/rules.py) and the panels (dashboards/queries.py) select series and
compute the heartbeat latency quantile with the same code, so a rule and its panel
measure the same thing. The dashboards import alerts (this module, the thresholds
and the rules, for their alert panels); the rules and thresholds never import the
dashboards (only alerts/generate.py, which renders both).
"""

from __future__ import annotations

from sparkmirror import metrics as m


def sel(spec: m.MetricSpec, *matchers: str, suffix: str = "") -> str:
    """``name{matchers}`` of a spec; ``suffix`` selects a histogram series (``_bucket``...)."""
    name = spec.name + suffix
    return f"{name}{{{','.join(matchers)}}}" if matchers else name


def rate(spec: m.MetricSpec, *matchers: str, window: str = "$__rate_interval", suffix: str = "") -> str:
    return f"rate({sel(spec, *matchers, suffix=suffix)}[{window}])"


def heartbeat_latency_quantile(q: float, *matchers: str, window: str = "$__rate_interval") -> str:
    buckets = f"sum by (flow, le) ({rate(m.HEARTBEAT_LATENCY, *matchers, window=window, suffix='_bucket')})"
    return f"histogram_quantile({q}, {buckets})"
