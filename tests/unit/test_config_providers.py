"""``${provider:path:key}`` references: resolved at load time by sparkmirror.configfile, never by the model."""

from __future__ import annotations

import pytest

from sparkmirror.configfile import load_config, resolve_references
from sparkmirror.errors import ConfigError
from sparkmirror.model.clients import JavaClientConfig, librdkafka_config
from sparkmirror.model.parse import parse_config

BASE = "clusters = a, b\na.bootstrap.servers = a1:9092\nb.bootstrap.servers = b1:9092\n"  # lines 1-3
FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"


def errors_of(excinfo) -> list[ConfigError]:
    return getattr(excinfo.value, "errors", [excinfo.value])


def test_file_directory_and_env_providers(tmp_path, monkeypatch):
    (tmp_path / "creds.properties").write_text("password = from-file\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "user").write_text("from-dir")
    monkeypatch.setenv("MM2_TRUST_PW", "from-env")
    providers = {"file": FILE_PROVIDER,
                 "dir": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
                 "env": "org.apache.kafka.common.config.provider.EnvVarConfigProvider"}
    java = {"sasl.jaas.config": f'x required username="${{dir:{tmp_path}/secrets:user}}" '
                                f'password="${{file:{tmp_path}/creds.properties:password}}";',
            "ssl.truststore.password": "${env:MM2_TRUST_PW}", "bootstrap.servers": "b:1"}
    resolved = resolve_references(java, providers)
    assert resolved["sasl.jaas.config"] == 'x required username="from-dir" password="from-file";'
    assert resolved["ssl.truststore.password"] == "from-env"
    assert resolved["bootstrap.servers"] == "b:1"


def test_unknown_provider_and_missing_key_are_errors_with_line(tmp_path):
    (tmp_path / "c.properties").write_text("a = 1\n")
    java = JavaClientConfig({"sasl.jaas.config": "${vault:x:y}", "ssl.key.password": f"${{file:{tmp_path}/c.properties:b}}"},
                            cluster="dr", origins={"sasl.jaas.config": ("m.properties", 3),
                                                   "ssl.key.password": ("m.properties", 4)})
    with pytest.raises(ConfigError) as info:
        resolve_references(java, {"file": FILE_PROVIDER})
    errs = errors_of(info)
    assert [(e.line, e.cluster) for e in errs] == [(3, "dr"), (4, "dr")]
    assert "not declared in config.providers" in errs[0].message
    assert "has no key 'b'" in errs[1].message


def test_loaded_config_resolves_config_providers_in_client_config(tmp_path):
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("dr.password = hunter2\n")
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + "config.providers = file\n"
                    f"config.providers.file.class = {FILE_PROVIDER}\n"
                    f"b.sasl.jaas.config = x required password=\"${{file:{secrets}:dr.password}}\";\n")
    cfg = load_config(path)
    assert cfg.client_config("b", "producer")["sasl.jaas.config"] == 'x required password="hunter2";'
    assert cfg.config_providers() == {"file": FILE_PROVIDER}


def test_loaded_config_unresolvable_reference_points_at_its_line(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + "b.ssl.truststore.password = ${vault:kv/kafka:pw}\n")
    cfg = load_config(path)
    with pytest.raises(ConfigError) as info:
        cfg.client_config("b", "consumer")
    (err,) = info.value.errors
    assert (err.file, err.line, err.cluster) == (str(path), 4, "b")


def test_parsed_text_keeps_references_and_translation_refuses_them(tmp_path):
    """The model reads no file: without a resolver the reference is kept as written, never passed on."""
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("pw = hunter2\n")
    cfg = parse_config(BASE + "config.providers = file\n"
                       f"config.providers.file.class = {FILE_PROVIDER}\n"
                       f"b.ssl.truststore.password = ${{file:{secrets}:pw}}\n", "mm2.properties")
    consumer = cfg.client_config("b", "consumer")
    assert consumer["ssl.truststore.password"] == f"${{file:{secrets}:pw}}"
    with pytest.raises(ConfigError) as info:
        librdkafka_config(consumer, "consumer")
    (err,) = errors_of(info)
    assert "still contains the config provider reference" in err.message
    assert (err.file, err.line, err.cluster) == ("mm2.properties", 6, "b")
