"""Error messages about a broken ``sasl.jaas.config`` never quote the password (no Kafka needed).

The end-to-end check, every output of validate and monitor, is
tests/integration/test_secrets_never_shown.py; this one tries many broken JAAS
lines quickly.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.errors import ConfigError
from sparkmirror.model.clients import translate_librdkafka
from sparkmirror.model.jaas import parse_jaas

SECRET = "Hx7secretMARKER"
MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
junk = st.lists(st.sampled_from(["junk", "=", ";", '"q"', "key=", "x=y", "required", "/* c */", '"', "\\"]),
                max_size=4).map(" ".join)


@given(st.sampled_from([f'password="{SECRET}"', f"password={SECRET}", f'username="u" password="{SECRET}"']),
       junk, st.sampled_from(["", ";"]))
def test_jaas_errors_never_quote_the_password(option, tail, end):
    text = f"{MODULE} required {option} {tail}{end}"
    try:
        parse_jaas(text)
    except ValueError as exc:
        assert SECRET not in str(exc)
    java = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": text}
    try:
        translate_librdkafka(java, "consumer", cluster="a")
    except ConfigError as exc:
        assert SECRET not in str(exc) and SECRET not in (exc.hint or "")
