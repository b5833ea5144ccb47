"""Which SASL mechanisms the installed librdkafka was built with.

The PyPI wheel of confluent-kafka has no libsasl2, so no GSSAPI: a Kerberos mm2.properties
would validate and then fail at the first client. The translation in
:mod:`sparkmirror.model.clients` asks here first and refuses the file at its line.
"""

from __future__ import annotations

import functools


GSSAPI_HINT = ("the confluent-kafka wheel from PyPI has no Kerberos: build one against a librdkafka with libsasl2 "
               "with scripts/build-gssapi-client.sh and put the directory it prints first on PYTHONPATH "
               "(docs/security.md, Kerberos)")


@functools.cache
def library_sasl_error(mechanism: str) -> str | None:
    """The installed librdkafka's own refusal of SASL ``mechanism``, or None if it has it.

    librdkafka checks the mechanism against its build when a client is created, before any
    connection, so creating one idle producer asks it without a network. The PyPI wheel of
    confluent-kafka is built without libsasl2: GSSAPI validates as a setting and then fails at
    the first client, which is why start-up and ``validate`` ask the library first."""
    import confluent_kafka

    conf = {"security.protocol": "sasl_plaintext", "sasl.mechanism": mechanism, "log_level": 0}
    if mechanism.startswith(("PLAIN", "SCRAM")):
        conf.update({"sasl.username": "probe", "sasl.password": "probe"})  # required, never sent
    if mechanism == "GSSAPI":  # no kinit at creation, so no keytab is needed to ask
        conf["sasl.kerberos.min.time.before.relogin"] = 0
    try:
        confluent_kafka.Producer(conf)
    except confluent_kafka.KafkaException as exc:
        text = str(exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else exc)
        return text.removeprefix("Failed to create producer: ")
    return None


def unsupported_by_library(mechanism: str) -> str | None:
    refusal = library_sasl_error(mechanism)
    if refusal is None:
        return None
    import confluent_kafka

    wheel = confluent_kafka.version()
    wheel = wheel[0] if isinstance(wheel, tuple) else wheel
    return (f"`sasl.mechanism` {mechanism}: the installed confluent-kafka {wheel} "
            f"(librdkafka {confluent_kafka.libversion()[0]}) cannot use it: {refusal}")
