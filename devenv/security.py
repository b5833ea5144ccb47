"""SASL_SSL for the dev/test clusters: a throwaway CA, a broker certificate, SCRAM users.

A cluster started with a :class:`SaslSsl` listens for clients on SASL_SSL only
(SCRAM-SHA-512, TLS with a certificate for ``127.0.0.1`` and ``localhost``
signed by a CA made here with openssl). The CA certificate is written as PEM,
the one truststore format both Spark's JVM Kafka client (``ssl.truststore.type
= PEM``) and librdkafka (``ssl.ca.location``) read; the broker's own key sits in
a password-protected PKCS12 keystore. Every password is random per run, so a
test can grep output for it.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from sparkmirror.errors import ClusterError

SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: The user the broker itself authenticates as (inter-broker listener); a super user.
BROKER_USER = "broker"


def random_password(label: str) -> str:
    """A password that is also a unique, greppable marker (letters and digits only: safe in JAAS and shells)."""
    return f"Pw{label}{secrets.token_hex(12)}"


@dataclass(frozen=True)
class TestCA:
    """Paths of the CA certificate (PEM, the clients' truststore) and the broker's PKCS12 keystore."""

    ca_pem: Path
    keystore: Path
    keystore_password: str
    broker_key_pem: Path

    @property
    def key_material(self) -> list[str]:
        """The base64 body lines of the broker's private key, for leak checks."""
        return [line for line in self.broker_key_pem.read_text().splitlines()
                if line and not line.startswith("-----")]


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        # openssl never echoes pass: arguments, but be safe and show only its stderr's first lines
        raise ClusterError(f"openssl {args[0]} failed: {done.stderr.strip()[:500]}",
                           hint="is openssl (>= 1.1.1) on PATH?")


def make_test_ca(directory: Path, name: str) -> TestCA:
    """A CA and a broker certificate for 127.0.0.1/localhost under ``directory`` (valid 2 days)."""
    directory.mkdir(parents=True, exist_ok=True)
    ext = directory / "broker.ext"
    ext.write_text("subjectAltName = IP:127.0.0.1, DNS:localhost\nextendedKeyUsage = serverAuth, clientAuth\n")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.pem",
             "-days", "2", "-subj", f"/CN=sparkmirror test CA {name}", cwd=directory)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker-key.pem", "-out", "broker.csr",
             "-subj", f"/CN=localhost/O=sparkmirror test {name}", cwd=directory)
    _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
             "-out", "broker.pem", "-days", "2", "-extfile", str(ext), cwd=directory)
    password = random_password(f"{name}keystore")
    _openssl("pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker-key.pem", "-certfile", "ca.pem",
             "-name", "broker", "-out", "broker.p12", "-passout", f"pass:{password}", cwd=directory)
    (directory / "ca-key.pem").unlink()  # nothing else is ever signed with it
    return TestCA(directory / "ca.pem", directory / "broker.p12", password, directory / "broker-key.pem")


@dataclass
class SaslSsl:
    """SASL_SSL settings of one cluster: its CA material and its SCRAM users (name -> password)."""

    ca: TestCA
    users: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, directory: Path, name: str, users: tuple[str, ...] = ("mirror",)) -> "SaslSsl":
        all_users = {BROKER_USER: random_password(f"{name}{BROKER_USER}")}
        all_users.update({user: random_password(f"{name}{user}") for user in users})
        return cls(make_test_ca(directory, name), all_users)

    def jaas(self, user: str, password: str | None = None) -> str:
        return (f'{SCRAM_MODULE} required username="{user}" '
                f'password="{self.users[user] if password is None else password}";')

    def scram_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments that create every user's SCRAM credential."""
        out = []
        for user, password in self.users.items():
            out += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
        return out

    def broker_properties(self, port: int, controller_port: int) -> dict[str, str]:
        """server.properties entries: SASL_SSL for clients and the broker itself on ``port``; the
        KRaft controller stays on its own loopback PLAINTEXT listener."""
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
            "inter.broker.listener.name": "SASL_SSL",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
            f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": self.jaas(BROKER_USER),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.ca.keystore),
            "ssl.keystore.password": self.ca.keystore_password,
            "ssl.key.password": self.ca.keystore_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.ca_pem),
            "ssl.client.auth": "none",
            "super.users": ";".join(f"User:{u}" for u in self.users),
        }

    def librdkafka(self, user: str = BROKER_USER, password: str | None = None) -> dict[str, str]:
        """confluent-kafka settings to connect as ``user`` (the broker user by default)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM_MECHANISM, "sasl.username": user,
                "sasl.password": self.users[user] if password is None else password,
                "ssl.ca.location": str(self.ca.ca_pem)}

    def mm2_properties(self, alias: str, user: str, password: str | None = None) -> dict[str, str]:
        """The ``<alias>.*`` security keys of an mm2.properties, as MM2 itself reads them."""
        return {
            f"{alias}.security.protocol": "SASL_SSL",
            f"{alias}.sasl.mechanism": SCRAM_MECHANISM,
            f"{alias}.sasl.jaas.config": self.jaas(user, password),
            f"{alias}.ssl.truststore.type": "PEM",
            f"{alias}.ssl.truststore.location": str(self.ca.ca_pem),
        }

    def secrets(self) -> dict[str, str]:
        """Every password of this cluster by a name, for leak checks."""
        return {**{f"scram {u}": p for u, p in self.users.items()}, "keystore password": self.ca.keystore_password}
