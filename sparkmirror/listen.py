"""Where an HTTP endpoint listens: ``--listen`` (monitor) and ``--metrics-listen`` (replicator).

Accepted: ``HOST:PORT``, ``[v6-address]:PORT``, and ``:PORT`` or ``PORT`` for
127.0.0.1 (never every interface by accident). Where the endpoint can be switched
off (the replicator's metrics), ``off``, ``none``, ``0`` or an empty value does so.
"""

from __future__ import annotations

from sparkmirror.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
_OFF = ("off", "none", "0", "")


def parse_listen(text: str, option: str, example: str, can_be_off: bool = False) -> tuple[str, int] | None:
    """(host, port) for ``text``; None when ``can_be_off`` and the text switches the endpoint off.

    ``option`` (e.g. ``--listen``) and ``example`` name the option and a good value in the error."""
    if can_be_off and text.strip().lower() in _OFF:
        return None
    host, _, port = text.strip().rpartition(":")
    host = host.strip("[]") or DEFAULT_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{option} {text!r} is not HOST:PORT",
                          hint=f"for example {example}" + (", or off" if can_be_off else ""))
    return host, int(port)
