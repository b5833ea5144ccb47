"""Java client settings -> librdkafka / Spark: translated, dropped with a reason, or refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.errors import ConfigError
from sparkmirror.model.clients import JavaClientConfig, librdkafka_config, spark_kafka_options, translate_librdkafka
from sparkmirror.model.jaas import parse_jaas
from sparkmirror.model.masking import MASK, is_secret, mask_secrets

PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="mm2" password="s3cret";'
SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="pw";'


def errors_of(excinfo) -> list[ConfigError]:
    return getattr(excinfo.value, "errors", [excinfo.value])


# --- JAAS ------------------------------------------------------------------------------


def test_jaas_plain_and_scram_options():
    login = parse_jaas(PLAIN)
    assert login.module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert login.flag == "required"
    assert login.options == {"username": "mm2", "password": "s3cret"}


def test_jaas_quoted_values_keep_separators_and_escapes():
    text = r'x.ScramLoginModule REQUIRED username="a b" password="p;w=\"q\"\\z" tokenauth=true;'
    login = parse_jaas(text)
    assert login.flag == "required"
    assert login.options == {"username": "a b", "password": 'p;w="q"\\z', "tokenauth": "true"}


def test_jaas_multiline_and_comments():
    text = 'x.PlainLoginModule required /* who */\n  username="u"   // the user\n  password="p"\n;'
    assert parse_jaas(text).options == {"username": "u", "password": "p"}


@pytest.mark.parametrize("bad", [
    'x.PlainLoginModule required username="u"',            # no ;
    'x.PlainLoginModule required username="u;',            # unterminated quote
    'x.PlainLoginModule maybe username="u";',               # bad flag
    'x.PlainLoginModule required username;',                # no value
    'a.A required; b.B required;',                          # two modules
])
def test_jaas_malformed(bad):
    with pytest.raises(ValueError):
        parse_jaas(bad)


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30),
       st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30))
def test_jaas_round_trip_of_any_username_and_password(user, password):
    text = f"org.apache.kafka.common.security.scram.ScramLoginModule required username={_jaas_quote(user)} " \
           f"password={_jaas_quote(password)};"
    assert parse_jaas(text).options == {"username": user, "password": password}


# --- SASL --------------------------------------------------------------------------------


def test_sasl_plain_to_username_password():
    conf = librdkafka_config({"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL",
                              "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN}, "consumer")
    assert conf == {"bootstrap.servers": "b:9092", "security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN",
                    "sasl.username": "mm2", "sasl.password": "s3cret"}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_scram(mechanism):
    conf = librdkafka_config({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                              "sasl.jaas.config": SCRAM}, "producer")
    assert conf["sasl.mechanism"] == mechanism
    assert (conf["sasl.username"], conf["sasl.password"]) == ("mm2", "pw")


def test_missing_mechanism_with_plain_module_explains_the_gssapi_default():
    java = JavaClientConfig({"security.protocol": "SASL_SSL", "sasl.jaas.config": PLAIN}, cluster="src",
                            origins={"sasl.jaas.config": ("mm2.properties", 7)})
    with pytest.raises(ConfigError) as info:
        librdkafka_config(java, "consumer")
    (err,) = errors_of(info)
    assert (err.file, err.line, err.cluster) == ("mm2.properties", 7, "src")
    assert "sasl.mechanism = PLAIN" in err.hint


@pytest.fixture
def gssapi_build(monkeypatch):
    """A librdkafka built with libsasl2: the translation itself, whatever the installed wheel has."""
    from sparkmirror.model import saslbuild

    monkeypatch.setattr(saslbuild, "library_sasl_error", lambda mechanism: None)


def test_gssapi_without_keytab_is_refused_naming_cluster_and_key(gssapi_build):
    with pytest.raises(ConfigError) as info:
        librdkafka_config({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "admin",
                          cluster="dr")
    (err,) = errors_of(info)
    assert err.cluster == "dr" and "`sasl.mechanism`" in err.message and "keytab" in err.message


def test_gssapi_keytab_from_krb5_module(gssapi_build, tmp_path):
    keytab = tmp_path / "mm2.keytab"
    keytab.write_bytes(b"\x05\x02")
    jaas = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
            f'keyTab="{keytab}" principal="mm2@EXAMPLE.COM";')
    conf = librdkafka_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas,
                              "sasl.kerberos.service.name": "kafka"}, "consumer")
    assert conf["sasl.kerberos.keytab"] == str(keytab)
    assert conf["sasl.kerberos.principal"] == "mm2@EXAMPLE.COM"
    assert conf["sasl.kerberos.service.name"] == "kafka"


def test_a_keytab_that_is_not_there_is_refused_naming_the_key_and_the_path(gssapi_build, tmp_path):
    gone = tmp_path / "gone.keytab"
    jaas = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
            f'keyTab="{gone}" principal="mm2@EXAMPLE.COM";')
    with pytest.raises(ConfigError) as info:
        librdkafka_config({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas},
                          "consumer", cluster="primary")
    (err,) = errors_of(info)
    assert err.cluster == "primary" and "`sasl.jaas.config`" in err.message
    assert str(gone) in err.message and "does not exist" in err.message


def test_oauthbearer_custom_callback_is_refused():
    with pytest.raises(ConfigError) as info:
        librdkafka_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                           "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                               "required;",
                           "sasl.login.callback.handler.class": "com.acme.MyTokenHandler"}, "consumer")
    assert "com.acme.MyTokenHandler" in errors_of(info)[0].message


def test_oauthbearer_oidc_client_credentials():
    conf = librdkafka_config({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                            'clientId="mm2" clientSecret="shh" scope="kafka";'}, "producer")
    assert conf["sasl.oauthbearer.method"] == "oidc"
    assert conf["sasl.oauthbearer.client.id"] == "mm2"
    assert conf["sasl.oauthbearer.client.secret"] == "shh"
    assert conf["sasl.oauthbearer.scope"] == "kafka"
    assert conf["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/token"


def test_sasl_settings_are_dropped_when_protocol_is_not_sasl():
    result = translate_librdkafka({"security.protocol": "PLAINTEXT", "sasl.jaas.config": PLAIN}, "consumer")
    assert "sasl.username" not in result.config
    assert "sasl.jaas.config" in result.dropped


def test_bad_security_protocol():
    with pytest.raises(ConfigError, match="security.protocol"):
        librdkafka_config({"security.protocol": "TLS"}, "consumer")


# --- SSL ------------------------------------------------------------------------------------


def test_pem_truststore_and_pkcs12_keystore():
    conf = librdkafka_config({
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/c/ca.pem",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/c/me.p12", "ssl.keystore.password": "kp",
        "ssl.endpoint.identification.algorithm": ""}, "producer")
    assert conf["ssl.ca.location"] == "/c/ca.pem"
    assert conf["ssl.keystore.location"] == "/c/me.p12"
    assert conf["ssl.keystore.password"] == "kp"
    assert conf["ssl.endpoint.identification.algorithm"] == "none"


@pytest.mark.parametrize("store_type", [None, "JKS", "PKCS12"])
def test_java_truststores_are_refused_with_a_conversion_hint(store_type):
    java = {"security.protocol": "SSL", "ssl.truststore.location": "/c/trust.jks", "ssl.truststore.password": "x"}
    if store_type:
        java["ssl.truststore.type"] = store_type
    with pytest.raises(ConfigError) as info:
        librdkafka_config(java, "consumer", cluster="primary")
    (err,) = errors_of(info)
    assert "truststore" in err.message and "PEM" in err.hint and err.cluster == "primary"


def test_jks_keystore_is_refused():
    with pytest.raises(ConfigError, match="keystore"):
        librdkafka_config({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                           "ssl.truststore.location": "/ca.pem", "ssl.keystore.location": "/ks.jks"}, "consumer")


def test_pem_keystore_and_inline_pem():
    conf = librdkafka_config({"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                              "ssl.keystore.location": "/c/me.pem", "ssl.key.password": "kp",
                              "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "-----BEGIN CERT"},
                             "admin")
    assert conf["ssl.certificate.location"] == conf["ssl.key.location"] == "/c/me.pem"
    assert conf["ssl.key.password"] == "kp"
    assert conf["ssl.ca.pem"] == "-----BEGIN CERT"


def test_ssl_settings_ignored_without_tls():
    result = translate_librdkafka({"ssl.truststore.location": "/x.jks"}, "consumer")
    assert result.config == {"security.protocol": "plaintext"}
    assert "ssl.truststore.location" in result.dropped


# --- tuning keys, roles, dropped and refused keys ---------------------------------------------


def test_producer_tuning_keys():
    conf = librdkafka_config({"acks": "all", "linger.ms": "20", "batch.size": "65536", "compression.type": "ZSTD",
                              "max.request.size": "2097152", "request.timeout.ms": "30000", "retries": "10",
                              "delivery.timeout.ms": "120000", "enable.idempotence": "true",
                              "max.in.flight.requests.per.connection": "5", "buffer.memory": "33554432",
                              "client.id": "mm2"}, "producer")
    assert conf == {"security.protocol": "plaintext", "acks": "all", "linger.ms": "20", "batch.size": "65536",
                    "compression.type": "zstd", "message.max.bytes": "2097152", "request.timeout.ms": "30000",
                    "retries": "10", "delivery.timeout.ms": "120000", "enable.idempotence": "true",
                    "max.in.flight": "5", "queue.buffering.max.kbytes": "32768", "client.id": "mm2"}


def test_consumer_tuning_keys_and_role_filtering():
    java = {"isolation.level": "read_committed", "fetch.max.bytes": "52428800", "max.partition.fetch.bytes": "1048576",
            "fetch.max.wait.ms": "500", "auto.offset.reset": "earliest", "enable.auto.commit": "false",
            "request.timeout.ms": "30000", "acks": "all", "linger.ms": "5"}
    result = translate_librdkafka(java, "consumer")
    assert result.config == {"security.protocol": "plaintext", "isolation.level": "read_committed",
                             "fetch.max.bytes": "52428800", "max.partition.fetch.bytes": "1048576",
                             "fetch.wait.max.ms": "500", "auto.offset.reset": "earliest",
                             "enable.auto.commit": "false", "socket.timeout.ms": "30000"}
    assert set(result.dropped) == {"acks", "linger.ms"}


def test_serializers_are_dropped_with_a_reason_and_logged(caplog):
    caplog.set_level("DEBUG", logger="sparkmirror.model.clients")
    result = translate_librdkafka({"key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
                                   "value.deserializer": "x"}, "producer")
    assert "raw bytes" in result.dropped["key.serializer"]
    assert "key.serializer" in caplog.text


@pytest.mark.parametrize("key,value", [("interceptor.classes", "com.acme.Audit"),
                                       ("ssl.cipher.suites", "TLS_AES_256_GCM_SHA384"),
                                       ("partition.assignment.strategy", "com.acme.Assignor"),
                                       ("acks", "most")])
def test_settings_that_matter_but_cannot_be_translated_raise(key, value):
    java = {key: value}
    if key.startswith("ssl."):
        java["security.protocol"] = "SSL"
    with pytest.raises(ConfigError) as info:
        librdkafka_config(java, "consumer" if key == "partition.assignment.strategy" else "producer", cluster="c1")
    assert any(f"`{key}`" in e.message and e.cluster == "c1" for e in errors_of(info))


def test_unresolved_config_provider_reference_is_refused():
    with pytest.raises(ConfigError, match=r"\$\{vault:secret/kafka:password\}"):
        librdkafka_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                           "sasl.jaas.config": 'x.PlainLoginModule required username="u" '
                                               'password="${vault:secret/kafka:password}";'}, "consumer")


def test_all_problems_are_reported_together():
    with pytest.raises(ConfigError) as info:
        librdkafka_config({"security.protocol": "SSL", "ssl.truststore.location": "/t.jks",
                           "interceptor.classes": "x", "acks": "sometimes"}, "producer")
    assert len(errors_of(info)) == 3


def test_translated_configs_are_accepted_by_librdkafka():
    """Build real clients (no bootstrap.servers: librdkafka never connects) to prove the names exist."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    common = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM,
              "ssl.endpoint.identification.algorithm": "", "client.id": "t", "retry.backoff.ms": "100",
              "reconnect.backoff.max.ms": "1000", "metadata.max.age.ms": "60000", "send.buffer.bytes": "-1",
              "client.dns.lookup": "use_all_dns_ips"}
    producer = librdkafka_config({**common, "acks": "all", "linger.ms": "5", "batch.size": "16384",
                                  "compression.type": "lz4", "compression.lz4.level": "3",
                                  "max.request.size": "1048576", "retries": "3", "delivery.timeout.ms": "30000",
                                  "enable.idempotence": "true", "max.in.flight.requests.per.connection": "5",
                                  "buffer.memory": "1048576", "request.timeout.ms": "30000"}, "producer")
    consumer = librdkafka_config({**common, "group.id": "g", "isolation.level": "read_committed",
                                  "fetch.max.bytes": "1048576", "max.partition.fetch.bytes": "1048576",
                                  "fetch.min.bytes": "1", "fetch.max.wait.ms": "100", "session.timeout.ms": "45000",
                                  "heartbeat.interval.ms": "3000", "max.poll.interval.ms": "300000",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": "false",
                                  "partition.assignment.strategy":
                                      "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
                                  "request.timeout.ms": "30000", "client.rack": "r1"}, "consumer")
    admin = librdkafka_config({**common, "request.timeout.ms": "30000"}, "admin")
    confluent_kafka.Producer(producer).flush(0)
    confluent_kafka.Consumer(consumer).close()
    AdminClient(admin)


# --- Spark ---------------------------------------------------------------------------------------


def test_spark_options_keep_java_names_under_kafka_prefix():
    java = {"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": PLAIN, "ssl.truststore.location": "/t.jks", "isolation.level": "read_committed",
            "enable.auto.commit": "false", "auto.offset.reset": "earliest", "key.deserializer": "x",
            "group.id": "g"}
    assert spark_kafka_options(java) == {
        "kafka.bootstrap.servers": "b:1", "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": PLAIN, "kafka.ssl.truststore.location": "/t.jks",
        "kafka.isolation.level": "read_committed", "startingOffsets": "earliest"}


@pytest.mark.parametrize("java", [{"interceptor.classes": "x"}, {"auto.offset.reset": "none"},
                                  {"sasl.jaas.config": "${file:/x:y}"}])
def test_spark_refuses_what_it_cannot_do(java):
    with pytest.raises(ConfigError):
        spark_kafka_options(java, cluster="primary")


# --- secrets -----------------------------------------------------------------------------------


def test_mask_secrets():
    config = {"sasl.jaas.config": PLAIN, "sasl.password": "p", "ssl.keystore.password": "k", "ssl.key.pem": "KEY",
              "sasl.oauthbearer.client.secret": "s", "kafka.sasl.jaas.config": PLAIN, "sasl.username": "mm2",
              "ssl.key.location": "/k.pem", "bootstrap.servers": "b:1", "ssl.truststore.password": ""}
    masked = mask_secrets(config)
    assert masked == {**config, "sasl.jaas.config": MASK, "sasl.password": MASK, "ssl.keystore.password": MASK,
                      "ssl.key.pem": MASK, "sasl.oauthbearer.client.secret": MASK, "kafka.sasl.jaas.config": MASK}
    assert config["sasl.password"] == "p"  # a copy


@given(st.sampled_from(["password", "secret", "jaas.config"]), st.text(alphabet="abc.", max_size=10))
def test_anything_named_like_a_secret_is_masked(word, prefix):
    key = f"{prefix}{word}"
    assert is_secret(key)
    assert mask_secrets({key: "value"}) == {key: MASK}
