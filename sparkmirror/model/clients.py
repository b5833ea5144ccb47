"""Java Kafka client settings -> librdkafka (confluent-kafka) settings and Spark source options.

mm2.properties speaks the Java client's language (``sasl.jaas.config``, JKS
truststores, ``max.request.size``...). sparkmirror's writer and control plane use
confluent-kafka (librdkafka), while Spark's Kafka source is the Java client
itself. So the same effective settings are translated twice:

* :func:`librdkafka_config` renames and converts what librdkafka understands,
  drops what cannot matter to it (serializer classes, JMX reporters) with a
  debug-logged reason, and raises ConfigError for anything that matters but
  has no librdkafka equivalent (JKS stores, custom login classes, unresolved
  ``${provider:path:key}`` references). A security setting is never silently
  lost: a replicator that quietly connects without TLS is worse than one that
  refuses to start.
* :func:`spark_kafka_options` keeps the Java names under ``kafka.`` and removes
  the few options Spark forbids, mapping ``auto.offset.reset`` to Spark's own
  ``startingOffsets``.

Both share the checks here (ClientErrors points each problem at its line; a
``${provider:path:key}`` reference still left is refused): references are
resolved before translation, by the start-up code that may read files and the
environment (:mod:`sparkmirror.configfile`). A ``sasl.jaas.config`` value is
read by :mod:`sparkmirror.model.jaas`; printing a translated config masks its
secrets with :mod:`sparkmirror.model.masking`.

The module is longer than most because its bulk is the key tables, which are
the librdkafka translation itself and read best next to the code that applies
them.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from sparkmirror.errors import ConfigError, ConfigErrors
from sparkmirror.model.jaas import JaasLogin, parse_jaas
from sparkmirror.model.saslbuild import GSSAPI_HINT, unsupported_by_library

log = logging.getLogger(__name__)

ROLES = ("consumer", "producer", "admin")
_ALL, _P, _C = frozenset(ROLES), frozenset({"producer"}), frozenset({"consumer"})

# Java name -> (librdkafka name, roles it applies to). Values pass through unchanged.
_RENAMED: dict[str, tuple[str, frozenset[str]]] = {
    "bootstrap.servers": ("bootstrap.servers", _ALL),
    "client.id": ("client.id", _ALL),
    "retry.backoff.ms": ("retry.backoff.ms", _ALL),
    "retry.backoff.max.ms": ("retry.backoff.max.ms", _ALL),
    "reconnect.backoff.ms": ("reconnect.backoff.ms", _ALL),
    "reconnect.backoff.max.ms": ("reconnect.backoff.max.ms", _ALL),
    "connections.max.idle.ms": ("connections.max.idle.ms", _ALL),
    "metadata.max.age.ms": ("metadata.max.age.ms", _ALL),
    "socket.connection.setup.timeout.ms": ("socket.connection.setup.timeout.ms", _ALL),
    "client.dns.lookup": ("client.dns.lookup", _ALL),
    "sasl.kerberos.service.name": ("sasl.kerberos.service.name", _ALL),
    "sasl.kerberos.min.time.before.relogin": ("sasl.kerberos.min.time.before.relogin", _ALL),
    "sasl.oauthbearer.token.endpoint.url": ("sasl.oauthbearer.token.endpoint.url", _ALL),
    "sasl.oauthbearer.scope": ("sasl.oauthbearer.scope", _ALL),
    "acks": ("acks", _P),
    "linger.ms": ("linger.ms", _P),
    "batch.size": ("batch.size", _P),
    "compression.type": ("compression.type", _P),
    "compression.gzip.level": ("compression.level", _P),
    "compression.lz4.level": ("compression.level", _P),
    "compression.zstd.level": ("compression.level", _P),
    "retries": ("retries", _P),
    "delivery.timeout.ms": ("delivery.timeout.ms", _P),
    "enable.idempotence": ("enable.idempotence", _P),
    "max.in.flight.requests.per.connection": ("max.in.flight", _ALL),
    "max.request.size": ("message.max.bytes", _P),
    "transactional.id": ("transactional.id", _P),
    "transaction.timeout.ms": ("transaction.timeout.ms", _P),
    "request.timeout.ms": ("request.timeout.ms", _P),
    "group.id": ("group.id", _C),
    "group.instance.id": ("group.instance.id", _C),
    "group.protocol": ("group.protocol", _C),
    "group.remote.assignor": ("group.remote.assignor", _C),
    "isolation.level": ("isolation.level", _C),
    "fetch.max.bytes": ("fetch.max.bytes", _C),
    "max.partition.fetch.bytes": ("max.partition.fetch.bytes", _C),
    "fetch.min.bytes": ("fetch.min.bytes", _C),
    "fetch.max.wait.ms": ("fetch.wait.max.ms", _C),
    "session.timeout.ms": ("session.timeout.ms", _C),
    "heartbeat.interval.ms": ("heartbeat.interval.ms", _C),
    "max.poll.interval.ms": ("max.poll.interval.ms", _C),
    "enable.auto.commit": ("enable.auto.commit", _C),
    "auto.commit.interval.ms": ("auto.commit.interval.ms", _C),
    "allow.auto.create.topics": ("allow.auto.create.topics", _C),
    "check.crcs": ("check.crcs", _C),
    "client.rack": ("client.rack", _C),
}

# Settings whose meaning is JVM-only; dropping them changes nothing sparkmirror does.
_IRRELEVANT: dict[str, str] = {
    "key.serializer": "sparkmirror copies raw bytes; no serializer runs",
    "value.serializer": "sparkmirror copies raw bytes; no serializer runs",
    "key.deserializer": "sparkmirror copies raw bytes; no deserializer runs",
    "value.deserializer": "sparkmirror copies raw bytes; no deserializer runs",
    "partitioner.class": "records go to the source partition number; no partitioner runs",
    "partitioner.ignore.keys": "records go to the source partition number; no partitioner runs",
    "partitioner.adaptive.partitioning.enable": "records go to the source partition number",
    "partitioner.availability.timeout.ms": "records go to the source partition number",
    "metric.reporters": "JVM metrics reporter; sparkmirror exports its own metrics",
    "metrics.num.samples": "JVM client metrics only",
    "metrics.sample.window.ms": "JVM client metrics only",
    "metrics.recording.level": "JVM client metrics only",
    "auto.include.jmx.reporter": "JVM client metrics only",
    "enable.metrics.push": "JVM client metrics only",
    "max.block.ms": "librdkafka's produce() never blocks on metadata; it queues",
    "max.poll.records": "librdkafka has no poll batch cap; the caller sizes consume() batches",
    "exclude.internal.topics": "sparkmirror subscribes to explicit topics, never to internal ones",
    "default.api.timeout.ms": "confluent-kafka takes timeouts per call",
    "socket.connection.setup.timeout.max.ms": "librdkafka has no separate maximum",
    "ssl.protocol": "OpenSSL negotiates the highest TLS version both sides support",
    "ssl.enabled.protocols": "OpenSSL negotiates the highest TLS version both sides support",
    "ssl.keymanager.algorithm": "JSSE-only setting",
    "ssl.trustmanager.algorithm": "JSSE-only setting",
    "ssl.secure.random.implementation": "JSSE-only setting",
    "ssl.provider": "JSSE-only setting",
    "sasl.kerberos.kinit.cmd": "librdkafka builds its own kinit command from keytab and principal",
    "sasl.kerberos.ticket.renew.window.factor": "librdkafka re-runs kinit every sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.ticket.renew.jitter": "librdkafka re-runs kinit every sasl.kerberos.min.time.before.relogin",
}
_IRRELEVANT_PREFIXES = ("sasl.login.refresh.", "sasl.login.retry.backoff.", "sasl.login.connect.", "sasl.login.read.",
                        "sasl.oauthbearer.jwks.", "sasl.oauthbearer.expected.", "sasl.oauthbearer.clock.",
                        "sasl.oauthbearer.sub.claim.", "sasl.oauthbearer.scope.claim.", "sasl.oauthbearer.header.")

# Settings that matter but that librdkafka cannot honour: refuse, say what to do.
_UNTRANSLATABLE: dict[str, str] = {
    "interceptor.classes": "Java interceptors cannot run in librdkafka; remove it",
    "ssl.cipher.suites": "JSSE cipher names differ from OpenSSL's; remove it (OpenSSL picks secure defaults)",
    "ssl.engine.factory.class": "a custom JSSE engine cannot run in librdkafka",
    "sasl.client.callback.handler.class": "a custom Java SASL callback cannot run in librdkafka",
    "sasl.login.class": "a custom Java login class cannot run in librdkafka",
    "security.providers": "JVM security providers cannot run in librdkafka",
}

_STANDARD_OIDC_HANDLERS = {
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
}
_SASL_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "GSSAPI": "com.sun.security.auth.module.Krb5LoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_ENUMS = {
    "acks": {"all", "-1", "0", "1"},
    "compression.type": {"none", "gzip", "snappy", "lz4", "zstd"},
    "isolation.level": {"read_committed", "read_uncommitted"},
    "client.dns.lookup": {"use_all_dns_ips", "resolve_canonical_bootstrap_servers_only", "default"},
    "auto.offset.reset": {"earliest", "latest", "none"},
}
_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}
_NUMERIC = re.compile(r"[+-]?[0-9]+")
# Kafka's ConfigTransformer pattern: ${provider:[path:]key}
REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")

#: Every Java client key this module knows about (used by the config model to
#: tell "a client setting written at the wrong level" from a typo).
JAVA_CLIENT_KEYS = frozenset(_RENAMED) | frozenset(_IRRELEVANT) | frozenset(
    _UNTRANSLATABLE) | {"security.protocol", "auto.offset.reset", "buffer.memory", "send.buffer.bytes",
                        "receive.buffer.bytes", "partition.assignment.strategy"}


class JavaClientConfig(dict[str, str]):
    """Java client settings for one client of one cluster, remembering where each came from.

    ``origins`` maps a key to the (file, line) it was written at, so translation
    errors can point at the line to fix.
    """

    def __init__(self, data: Mapping[str, str] = (), *, cluster: str | None = None, role: str | None = None,
                 origins: Mapping[str, tuple[str, int | None]] | None = None) -> None:
        super().__init__(data)
        self.cluster = cluster
        self.role = role
        self.origins = dict(origins or {})


@dataclass(frozen=True)
class Translation:
    """librdkafka settings plus, for display and debugging, what was dropped and why."""

    config: dict[str, str]
    dropped: dict[str, str]


class ClientErrors:
    """Problems with one client's settings, each pointing at the line that set the key; raised together."""

    def __init__(self, java: Mapping[str, str], cluster: str | None) -> None:
        self.origins = getattr(java, "origins", {})
        self.cluster = cluster if cluster is not None else getattr(java, "cluster", None)
        self.items: list[ConfigError] = []

    def add(self, key: str, message: str, hint: str | None = None) -> None:
        if f"`{key}`" not in message:
            message = f"`{key}`: {message}"
        file, line = self.origins.get(key, (None, None))
        self.items.append(ConfigError(message, file=file, line=line, cluster=self.cluster, hint=hint))

    def raise_if_any(self) -> None:
        if self.items:
            raise ConfigErrors(self.items)


def librdkafka_config(java: Mapping[str, str], role: str, *, cluster: str | None = None) -> dict[str, str]:
    """librdkafka settings for a ``consumer``/``producer``/``admin`` client (see module doc)."""
    return translate_librdkafka(java, role, cluster=cluster).config


def translate_librdkafka(java: Mapping[str, str], role: str, *, cluster: str | None = None) -> Translation:
    """Like :func:`librdkafka_config`, also returning the dropped keys with their reasons."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    errors = ClientErrors(java, cluster)
    out: dict[str, str] = {}
    dropped: dict[str, str] = {}
    _check_references(java, errors)
    protocol = java.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in _PROTOCOLS:
        errors.add("security.protocol", f"`security.protocol` must be one of {', '.join(_PROTOCOLS)}, got {protocol!r}")
    else:
        out["security.protocol"] = protocol.lower()
    handled = {"security.protocol"}
    if protocol.startswith("SASL_"):
        handled |= _translate_sasl(java, out, errors)
    if protocol in ("SSL", "SASL_SSL"):
        handled |= _translate_ssl(java, out, dropped, errors)
    for key, value in java.items():
        if key in handled:
            continue
        if key.startswith(("ssl.", "sasl.")) and not _security_key_applies(key, protocol):
            dropped[key] = f"security.protocol is {protocol}; the Java client ignores it too"
        elif key in _UNTRANSLATABLE:
            errors.add(key, f"`{key}` cannot be used with librdkafka: {_UNTRANSLATABLE[key]}")
        elif key in _IRRELEVANT or key.startswith(_IRRELEVANT_PREFIXES):
            dropped[key] = _IRRELEVANT.get(key, "JVM-only login tuning")
        else:
            _translate_plain(key, value.strip(), role, out, dropped, errors)
    for key, reason in dropped.items():
        log.debug("not passing %s to librdkafka %s: %s", key, role, reason)
    errors.raise_if_any()
    return Translation(out, dropped)


def _security_key_applies(key: str, protocol: str) -> bool:
    if key.startswith("sasl."):
        return protocol.startswith("SASL_")
    return protocol in ("SSL", "SASL_SSL")


def _translate_plain(key: str, value: str, role: str, out: dict, dropped: dict, errors: ClientErrors) -> None:
    if key in _ENUMS and value.lower() not in _ENUMS[key]:
        errors.add(key, f"`{key}` must be one of {', '.join(sorted(_ENUMS[key]))}, got {value!r}")
        return
    if key == "auto.offset.reset":
        if role == "consumer":
            out["auto.offset.reset"] = {"none": "error"}.get(value.lower(), value.lower())
        else:
            dropped[key] = f"consumer setting, not used by a {role}"
    elif key in ("send.buffer.bytes", "receive.buffer.bytes"):
        # Java's -1 ("OS default") is librdkafka's 0
        out[f"socket.{key}"] = "0" if value == "-1" else value
    elif key == "buffer.memory":
        if role != "producer":
            dropped[key] = f"producer setting, not used by a {role}"
        elif not _NUMERIC.fullmatch(value):
            errors.add(key, f"`{key}` must be a number of bytes, got {value!r}")
        else:
            out["queue.buffering.max.kbytes"] = str(max(1, -(-int(value) // 1024)))
    elif key == "partition.assignment.strategy":
        if role != "consumer":
            dropped[key] = f"consumer setting, not used by a {role}"
            return
        names = [c.strip() for c in value.split(",") if c.strip()]
        unknown = [c for c in names if c not in _ASSIGNORS]
        if unknown:
            errors.add(key, f"`{key}`: librdkafka has no equivalent of {', '.join(unknown)}",
                       hint=f"use one of {', '.join(_ASSIGNORS)}")
        else:
            out["partition.assignment.strategy"] = ",".join(_ASSIGNORS[c] for c in names)
    elif key == "request.timeout.ms" and role != "producer":
        out["socket.timeout.ms"] = value  # librdkafka's request.timeout.ms is for produce requests only
    elif key == "client.dns.lookup" and value == "default":
        dropped[key] = "'default' was removed from Kafka 3.0; librdkafka's default applies"
    elif key in _RENAMED:
        target, roles = _RENAMED[key]
        if role not in roles:
            dropped[key] = f"{'/'.join(sorted(roles))} setting, not used by a {role}"
        else:
            out[target] = value.lower() if key in _ENUMS else value
    else:
        dropped[key] = "no librdkafka equivalent known to sparkmirror"


def _translate_sasl(java: Mapping[str, str], out: dict, errors: ClientErrors) -> set[str]:
    mechanism = java.get("sasl.mechanism", "GSSAPI").strip().upper()
    handled = {"sasl.mechanism", "sasl.jaas.config", "sasl.login.callback.handler.class",
               "sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.credentials.client.secret"}
    if mechanism not in _SASL_MODULES:
        errors.add("sasl.mechanism", f"`sasl.mechanism` {mechanism!r} is not supported by librdkafka",
                   hint=f"use one of {', '.join(_SASL_MODULES)}")
        return handled
    out["sasl.mechanism"] = mechanism
    text = java.get("sasl.jaas.config", "").strip()
    login = None
    if text:
        try:
            login = parse_jaas(text)
        except ValueError as exc:
            errors.add("sasl.jaas.config", f"`sasl.jaas.config` cannot be parsed: {exc}")
            return handled
        if login.module != _SASL_MODULES[mechanism]:
            implied = [m for m, mod in _SASL_MODULES.items() if mod == login.module]
            hint = (f"set sasl.mechanism = {implied[0]} (without it the Java client assumes GSSAPI)"
                    if implied and "sasl.mechanism" not in java else f"sasl.mechanism {mechanism} needs "
                    f"{_SASL_MODULES[mechanism]}")
            errors.add("sasl.jaas.config", f"`sasl.jaas.config` uses {login.module} but sasl.mechanism is {mechanism}",
                       hint=hint)
            return handled
    missing = unsupported_by_library(mechanism)
    if missing:
        errors.add("sasl.mechanism", missing, hint=GSSAPI_HINT if mechanism == "GSSAPI" else None)
        return handled
    if mechanism == "GSSAPI":
        _gssapi(login, out, errors)
    elif mechanism == "OAUTHBEARER":
        _oauthbearer(java, login, out, errors)
    elif login is None:
        errors.add("sasl.mechanism", f"SASL {mechanism} needs `sasl.jaas.config` with username and password",
                   hint="a JAAS file given to MM2 via KAFKA_OPTS is not visible to sparkmirror; "
                        "put it in sasl.jaas.config")
    else:
        for option, target in (("username", "sasl.username"), ("password", "sasl.password")):
            if option not in login.options:
                errors.add("sasl.jaas.config", f"`sasl.jaas.config` has no {option}=\"...\" option")
            else:
                out[target] = login.options[option]
    return handled


def _gssapi(login: JaasLogin | None, out: dict, errors: ClientErrors) -> None:
    options = login.options if login else {}
    if "keyTab" not in options or "principal" not in options:
        errors.add("sasl.mechanism" if login is None else "sasl.jaas.config",
                   "SASL GSSAPI (Kerberos) needs a keytab and principal for librdkafka",
                   hint='set sasl.jaas.config = com.sun.security.auth.module.Krb5LoginModule required '
                        'useKeyTab=true keyTab="/path/kafka.keytab" principal="user@REALM";')
        return
    keytab = options["keyTab"]
    if not os.access(keytab, os.R_OK) or not os.path.isfile(keytab):
        why = "is not readable by this user" if os.path.isfile(keytab) else "does not exist"
        errors.add("sasl.jaas.config", f"`sasl.jaas.config` keyTab {keytab} {why}",
                   hint="librdkafka runs kinit with that keytab on this machine: mount it here or fix the path")
        return
    out["sasl.kerberos.keytab"] = keytab
    out["sasl.kerberos.principal"] = options["principal"]


def _oauthbearer(java: Mapping[str, str], login: JaasLogin | None, out: dict, errors: ClientErrors) -> None:
    options = login.options if login else {}
    handler = java.get("sasl.login.callback.handler.class", "").strip()
    if handler and handler not in _STANDARD_OIDC_HANDLERS:
        errors.add("sasl.login.callback.handler.class",
                   f"`sasl.login.callback.handler.class` {handler} is custom Java code librdkafka cannot run",
                   hint="use Kafka's OAuthBearerLoginCallbackHandler with sasl.oauthbearer.token.endpoint.url")
        return
    if handler or "sasl.oauthbearer.token.endpoint.url" in java:
        client_id = java.get("sasl.oauthbearer.client.credentials.client.id") or options.get("clientId")
        secret = java.get("sasl.oauthbearer.client.credentials.client.secret") or options.get("clientSecret")
        if not java.get("sasl.oauthbearer.token.endpoint.url") or not client_id or not secret:
            errors.add("sasl.jaas.config", "OAUTHBEARER (OIDC) needs sasl.oauthbearer.token.endpoint.url and "
                       "clientId/clientSecret in sasl.jaas.config")
            return
        out.update({"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": client_id,
                    "sasl.oauthbearer.client.secret": secret})
        if "scope" in options:
            out["sasl.oauthbearer.scope"] = options["scope"]
    elif "unsecuredLoginStringClaim_sub" in options:
        out["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
        out["sasl.oauthbearer.config"] = f"principal={options['unsecuredLoginStringClaim_sub']}"
    else:
        errors.add("sasl.jaas.config", "OAUTHBEARER needs either an OIDC token endpoint "
                   "(sasl.oauthbearer.token.endpoint.url) or unsecuredLoginStringClaim_sub for testing")


def _translate_ssl(java: Mapping[str, str], out: dict, dropped: dict, errors: ClientErrors) -> set[str]:
    handled = {"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
               "ssl.truststore.certificates", "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password",
               "ssl.key.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
               "ssl.endpoint.identification.algorithm"}
    trust_type = java.get("ssl.truststore.type", "JKS").strip().upper()
    if "ssl.truststore.location" in java:
        if trust_type == "PEM":
            out["ssl.ca.location"] = java["ssl.truststore.location"]
            if "ssl.truststore.password" in java:
                dropped["ssl.truststore.password"] = "a PEM truststore has no password"
        else:
            errors.add("ssl.truststore.location",
                       f"librdkafka cannot read a {trust_type} truststore ({java['ssl.truststore.location']})",
                       hint="convert it to PEM (keytool -exportcert -rfc -alias <ca> -keystore <store> -file ca.pem) "
                            "and set ssl.truststore.type = PEM, ssl.truststore.location = ca.pem")
    if "ssl.truststore.certificates" in java:
        out["ssl.ca.pem"] = java["ssl.truststore.certificates"]
    key_type = java.get("ssl.keystore.type", "JKS").strip().upper()
    if "ssl.keystore.location" in java:
        location = java["ssl.keystore.location"]
        if key_type == "PKCS12":
            out["ssl.keystore.location"] = location
            if "ssl.keystore.password" in java:
                out["ssl.keystore.password"] = java["ssl.keystore.password"]
            if java.get("ssl.key.password", java.get("ssl.keystore.password")) != java.get("ssl.keystore.password"):
                errors.add("ssl.key.password", "librdkafka reads a PKCS12 key with ssl.keystore.password; "
                           "a different ssl.key.password cannot be used", hint="re-export the key with the store password")
        elif key_type == "PEM":
            out["ssl.certificate.location"] = location
            out["ssl.key.location"] = location
            if "ssl.key.password" in java:
                out["ssl.key.password"] = java["ssl.key.password"]
        else:
            errors.add("ssl.keystore.location", f"librdkafka cannot read a {key_type} keystore ({location})",
                       hint="convert it: keytool -importkeystore -srckeystore <store> -destkeystore ks.p12 "
                            "-deststoretype PKCS12, then set ssl.keystore.type = PKCS12")
    if "ssl.keystore.key" in java:
        out["ssl.key.pem"] = java["ssl.keystore.key"]
        if "ssl.key.password" in java:
            out["ssl.key.password"] = java["ssl.key.password"]
    if "ssl.keystore.certificate.chain" in java:
        out["ssl.certificate.pem"] = java["ssl.keystore.certificate.chain"]
    if "ssl.endpoint.identification.algorithm" in java:
        algorithm = java["ssl.endpoint.identification.algorithm"].strip().lower()
        out["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    return handled


def _check_references(java: Mapping[str, str], errors: ClientErrors) -> None:
    for key, value in java.items():
        match = REFERENCE.search(value)
        if match:
            errors.add(key, f"`{key}` still contains the config provider reference {match.group(0)}",
                       hint="declare the provider in config.providers (file, directory and env are supported)")


def spark_kafka_options(java: Mapping[str, str], *, cluster: str | None = None) -> dict[str, str]:
    """Options for Spark's Kafka source (``spark.readStream.format("kafka")``), consumer semantics.

    Spark runs the Java consumer, so names stay Java's under ``kafka.``. Spark
    owns deserialization, offsets and group management, so those are left out;
    ``auto.offset.reset`` becomes ``startingOffsets`` (MM2 starts new partitions
    at ``earliest``, Spark's default is ``latest``).
    """
    errors = ClientErrors(java, cluster)
    _check_references(java, errors)
    options: dict[str, str] = {}
    for key, value in java.items():
        if key in ("key.deserializer", "value.deserializer", "group.id", "enable.auto.commit"):
            log.debug("not passing %s to Spark: Spark manages it itself", key)
        elif key == "interceptor.classes":
            errors.add(key, "Spark's Kafka source does not allow `interceptor.classes`; remove it")
        elif key == "auto.offset.reset":
            reset = value.strip().lower()
            if reset not in ("earliest", "latest"):
                errors.add(key, f"Spark's Kafka source has no equivalent of auto.offset.reset={value!r}",
                           hint="use earliest or latest")
            else:
                options["startingOffsets"] = reset
        else:
            options[f"kafka.{key}"] = value
    errors.raise_if_any()
    return options

