"""`sparkmirror validate`: exit codes, FILE:LINE messages, readable and JSON output, masked secrets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparkmirror_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "configs"
VALID = ["seed-000-one-way-primary-dr", "seed-001-src-dst-sasl", "seed-002-dc1-dc2-active-active", "dev-primary-dr"]
LOCATED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?P<rest>.+)$")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["validate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def located(stderr: str) -> list[tuple[str, int, str]]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    parsed = [LOCATED.match(line) for line in lines]
    assert all(parsed), f"every stderr line must be FILE:LINE: ..., got {lines}"
    return [(m["file"], int(m["line"]), m["rest"]) for m in parsed]


def test_real_entry_point_runs_as_a_module():
    config = CONFIGS / "dev-primary-dr.properties"
    proc = subprocess.run([sys.executable, "-m", "sparkmirror_cli.main", "validate", str(config)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "primary->dr  enabled" in proc.stdout
    assert "dr->primary  disabled — heartbeats only" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("name", VALID)
def test_complete_seed_configs_validate(capsys, name):
    code, out, err = run(capsys, str(CONFIGS / f"{name}.properties"))
    assert code == 0, err
    assert "valid —" in out
    for file, line, rest in located(err):  # warnings only
        assert file.endswith(f"{name}.properties") and rest.startswith("warning: ")


def test_text_output_shows_effective_settings_with_their_lines(capsys):
    code, out, _ = run(capsys, str(CONFIGS / "seed-000-one-way-primary-dr.properties"))
    assert code == 0
    assert "cluster primary  primary-broker1:9092,primary-broker2:9092,primary-broker3:9092  (line 6)" in out
    assert "primary->dr  enabled  (line 14)" in out
    assert "  checkpoints     every 30s (line 43)" in out
    assert "  heartbeats      every 5s (line 45)" in out
    assert "  group offsets   off" in out
    assert "orders -> primary.orders" in out
    assert "  replication     mirror topics 3, heartbeats 3, checkpoints 3, offset-syncs 3" in out
    assert "  offset-syncs    on source (primary), offset.lag.max 100" in out
    assert "  tasks.max 4, exactly-once disabled" in out
    assert "    dr producer (records, checkpoints, heartbeats): bootstrap.servers=dr-broker1:9092" in out


def test_secrets_are_masked_and_warnings_go_to_stderr(capsys):
    code, out, err = run(capsys, str(CONFIGS / "seed-001-src-dst-sasl.properties"))
    assert code == 0
    assert "sasl.password=********" in out and "sasl.username=user" in out
    assert '"pass"' not in out and "password=pass" not in out
    warnings = located(err)
    assert [line for _, line, _ in warnings] == [34, 38]
    assert all(rest.startswith("warning: cluster ") for _, _, rest in warnings)


def test_seed_003_fails_with_the_host_lines(capsys):
    path = str(CONFIGS / "seed-003-empty-hosts.properties")
    code, out, err = run(capsys, path)
    assert code == 2 and out == ""
    assert [(f, line) for f, line, _ in located(err)] == [(path, 8), (path, 9)]
    assert "`source.bootstrap.servers` lists no hosts" in err


def test_seed_004_fails_with_placeholders_and_the_glob(capsys):
    path = str(CONFIGS / "seed-004-placeholders.properties")
    code, _, err = run(capsys, path)
    assert code == 2
    problems = [(line, rest) for _, line, rest in located(err) if not rest.startswith("warning:")]
    assert [line for line, _ in problems] == [2, 2, 5, 6]
    assert "did you mean .*?" in problems[-1][1]


def test_json_success(capsys):
    code, out, _ = run(capsys, "--json", str(CONFIGS / "seed-002-dc1-dc2-active-active.properties"))
    assert code == 0
    doc = json.loads(out)
    assert doc["valid"] is True
    assert list(doc["clusters"]) == ["DC1", "DC2"]
    flows = {f["name"]: f for f in doc["flows"]}
    assert flows["DC1->DC2"]["enabled"] and flows["DC2->DC1"]["enabled"]
    assert flows["DC1->DC2"]["topics"] == [".*"] and flows["DC1->DC2"]["lines"]["topics"] == 10
    assert flows["DC1->DC2"]["sync_group_offsets_enabled"] is True
    clients = {(c["cluster"], c["role"]) for c in flows["DC1->DC2"]["clients"]}
    assert clients == {("DC1", "consumer"), ("DC2", "producer"), ("DC1", "admin"), ("DC2", "admin"),
                       ("DC1", "producer")}
    consumer = next(c for c in flows["DC1->DC2"]["clients"] if c["role"] == "consumer")
    assert consumer["spark_source_options"]["kafka.bootstrap.servers"] == "dc1-kafka:9092"
    assert consumer["spark_source_options"]["startingOffsets"] == "earliest"


def test_json_errors(capsys):
    code, out, err = run(capsys, "--json", str(CONFIGS / "seed-003-empty-hosts.properties"))
    assert code == 2
    doc = json.loads(out)
    assert doc["valid"] is False
    assert [(e["line"], e["cluster"]) for e in doc["errors"]] == [(8, "source"), (9, "destination")]
    assert len(located(err)) == 2


def test_missing_file_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, str(tmp_path / "absent.properties"))
    assert code == 2
    assert "absent.properties" in err and "cannot read" in err


def test_client_translation_errors_fail_validation_at_their_line(capsys, tmp_path):
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b\n"
        "a.bootstrap.servers = a:9092\n"
        "b.bootstrap.servers = b:9092\n"
        "a->b.enabled = true\n"
        "b.security.protocol = SSL\n"
        "b.ssl.truststore.location = /etc/kafka/truststore.jks\n"
        "b.ssl.truststore.password = changeit\n"
        "a.consumer.interceptor.classes = com.acme.Audit\n"
    )
    code, out, err = run(capsys, str(config))
    assert code == 2 and out == ""
    problems = located(err)
    assert [(line, rest.split(" ")[0]) for _, line, rest in problems] == [
        (6, "`ssl.truststore.location`:"), (8, "`interceptor.classes`")]
    assert "(cluster b)" in problems[0][2] and "convert it to PEM" in problems[0][2]
    assert "changeit" not in err


def test_bad_value_and_warning_together(capsys, tmp_path):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = a:1\nb.bootstrap.servers = b:1\n"
                      "a->b.enabled = true\nemit.heartbeat.interval.seconds = 5\nsync.group.offsets.enabled = yes\n")
    code, _, err = run(capsys, str(config))
    assert code == 2
    problems = located(err)
    assert (5, "warning: unknown key `emit.heartbeat.interval.seconds`; did you mean "
               "`emit.heartbeats.interval.seconds`?") in [(line, rest) for _, line, rest in problems]
    assert any(line == 6 and "must be true or false, got 'yes'" in rest for _, line, rest in problems)


def test_help_explains_the_command(capsys):
    with pytest.raises(SystemExit) as info:
        main(["validate", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "FILE:LINE" in out and "--json" in out and "exit status" in out


def test_json_says_what_each_key_of_a_flow_does_where_it_was_set_and_its_default(capsys):
    code, out, _ = run(capsys, "--json", str(CONFIGS / "dev-primary-dr.properties"))
    assert code == 0
    keys = next(f for f in json.loads(out)["flows"] if f["name"] == "primary->dr")["keys"]
    assert keys["emit.checkpoints.interval.seconds"] == {
        "value": "10", "default": "60", "line": 25, "description": "seconds between two rounds of checkpoints"}
    assert keys["topics"]["line"] is None and keys["topics"]["value"] == keys["topics"]["default"]
    assert all(k["description"] for k in keys.values())


def test_a_kerberos_config_is_refused_at_the_mechanism_line_when_the_client_library_has_no_gssapi(
        capsys, tmp_path):
    from sparkmirror.model.saslbuild import library_sasl_error

    path = tmp_path / "kerberos.properties"
    keytab = tmp_path / "mm2.keytab"
    keytab.write_bytes(b"\x05\x02")
    path.write_text("clusters = primary, dr\n"
                    "primary.bootstrap.servers = p:9092\n"
                    "dr.bootstrap.servers = d:9092\n"
                    "primary->dr.enabled = true\n"
                    "primary.security.protocol = SASL_SSL\n"
                    "primary.sasl.mechanism = GSSAPI\n"
                    "primary.sasl.kerberos.service.name = kafka\n"
                    'primary.sasl.jaas.config = com.sun.security.auth.module.Krb5LoginModule required '
                    f'useKeyTab=true keyTab="{keytab}" principal="mm2@EXAMPLE.COM";\n')
    code, out, err = run(capsys, str(path))
    refusal = library_sasl_error("GSSAPI")  # what the installed librdkafka itself says
    if refusal is None:  # a GSSAPI-capable build: the same file is valid
        assert code == 0 and "sasl.kerberos.principal=mm2@EXAMPLE.COM" in out
        return
    assert code == 2 and out == ""
    ((file, line, rest),) = {located_line for located_line in located(err) if "GSSAPI" in located_line[2]}
    assert (file, line) == (str(path), 6)
    assert "cluster primary" in rest and "librdkafka" in rest and "Current build options" in rest
    assert "docs/security.md" in rest


def test_the_library_probe_accepts_what_the_pypi_wheel_has():
    from sparkmirror.model.saslbuild import library_sasl_error

    assert [m for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER") if library_sasl_error(m)] == []


def test_two_kerberos_principals_in_one_file_are_refused_at_the_second_ones_line(capsys, tmp_path, monkeypatch):
    """One process's Kerberos clients share one ticket cache: dr's clients would use primary's ticket."""
    from sparkmirror.model import saslbuild

    monkeypatch.setattr(saslbuild, "library_sasl_error", lambda mechanism: None)  # a GSSAPI-capable build
    keytabs = {alias: tmp_path / f"{alias}.keytab" for alias in ("primary", "dr")}
    for keytab in keytabs.values():
        keytab.write_bytes(b"\x05\x02")
    path = tmp_path / "two-principals.properties"
    lines = ["clusters = primary, dr", "primary.bootstrap.servers = p:9092", "dr.bootstrap.servers = d:9092",
             "primary->dr.enabled = true"]
    for alias, principal in (("primary", "mm2@EXAMPLE.COM"), ("dr", "mm2-dr@EXAMPLE.COM")):
        lines += [f"{alias}.security.protocol = SASL_PLAINTEXT", f"{alias}.sasl.mechanism = GSSAPI",
                  f"{alias}.sasl.jaas.config = com.sun.security.auth.module.Krb5LoginModule required "
                  f'useKeyTab=true keyTab="{keytabs[alias]}" principal="{principal}";']
    path.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, str(path))
    assert code == 2 and out == ""
    ((file, line, rest),) = located(err)
    assert (file, line) == (str(path), 10)
    assert "cluster dr" in rest and "mm2-dr@EXAMPLE.COM" in rest and "mm2@EXAMPLE.COM" in rest and "ticket cache" in rest

    path.write_text("\n".join(lines).replace("mm2-dr@", "mm2@") + "\n")  # one principal: valid
    code, out, err = run(capsys, str(path))
    assert code == 0, err
