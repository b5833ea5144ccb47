"""Secret values hidden wherever an effective client config is printed.

``validate`` prints every client's translated settings (librdkafka's names and
Spark's ``kafka.`` options); a password, a JAAS line or a private key in them
is shown as ``********``. is_secret judges by the key alone, so a new secret
setting of a known kind (``*.password``, ``*secret*``) is masked too.
"""

from __future__ import annotations

from collections.abc import Mapping

MASK = "********"


def is_secret(key: str) -> bool:
    """True for keys whose values must never be printed (passwords, JAAS, private keys)."""
    k = key.lower().removeprefix("kafka.")
    return ("password" in k or "secret" in k or k.endswith("jaas.config") or k.endswith("basic.auth.user.info")
            or k in {"ssl.key.pem", "ssl.keystore.key", "sasl.oauthbearer.config", "ssl.key"})


def mask_secrets(config: Mapping[str, object]) -> dict[str, object]:
    """A copy of ``config`` with every secret value replaced by ``********``."""
    return {k: (MASK if is_secret(k) and v not in (None, "") else v) for k, v in config.items()}
