"""SASL_SSL and mutual TLS for the dev/test clusters: a throwaway CA, a broker certificate,
SCRAM users or client certificates.

A cluster started with a :class:`SaslSsl` listens for clients on SASL_SSL only
(SCRAM-SHA-512, TLS with a certificate for ``127.0.0.1`` and ``localhost``
signed by a CA made here with openssl). The CA certificate is written as PEM,
the one truststore format both Spark's JVM Kafka client (``ssl.truststore.type
= PEM``) and librdkafka (``ssl.ca.location``) read; the broker's own key sits in
a password-protected PKCS12 keystore. Every password is random per run, so a
test can grep output for it.

A cluster started with a :class:`MutualTls` listens on SSL only and asks every client for a
certificate signed by its CA; the certificate's CN is the principal (``User:mirror``).
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
    #: client certificates the CA signed, by user (mutual TLS)
    clients: dict[str, "ClientCertificate"] = field(default_factory=dict)

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


def make_test_ca(directory: Path, name: str, clients: tuple[str, ...] = ()) -> TestCA:
    """A CA and a broker certificate for 127.0.0.1/localhost under ``directory`` (valid 2 days),
    and a client certificate per name in ``clients`` (see :func:`_client_certificate`)."""
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
    signed = {client: _client_certificate(directory, client, "ca.pem", "ca-key.pem") for client in clients}
    (directory / "ca-key.pem").unlink()  # nothing else is ever signed with it
    return TestCA(directory / "ca.pem", directory / "broker.p12", password, directory / "broker-key.pem", signed)


@dataclass(frozen=True)
class ClientCertificate:
    """One PEM file holding a client's certificate and its encrypted key, and the key's password."""

    pem: Path
    key_password: str

    @property
    def key_material(self) -> list[str]:
        body = self.pem.read_text().split("-----BEGIN ENCRYPTED PRIVATE KEY-----")[1]
        return [line for line in body.splitlines() if line and not line.startswith("-----")]


def _client_certificate(directory: Path, user: str, ca: str | None, ca_key: str | None) -> ClientCertificate:
    """``<user>.pem``: a certificate with CN=user (signed by ``ca``, or self-signed) and its key.

    The key is PKCS#8 with PBE-SHA1-3DES: Java 17's PEM keystore cannot decrypt OpenSSL 3's
    default PBES2/AES encryption, while both it and librdkafka read this one."""
    password = random_password(f"{user}key")
    (directory / f"{user}.ext").write_text("extendedKeyUsage = clientAuth\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{user}-plain.pem", "-out", f"{user}.csr",
             "-subj", f"/CN={user}/O=sparkmirror test client", cwd=directory)
    if ca is None:
        _openssl("x509", "-req", "-in", f"{user}.csr", "-signkey", f"{user}-plain.pem", "-out", f"{user}-cert.pem",
                 "-days", "2", "-extfile", f"{user}.ext", cwd=directory)
    else:
        _openssl("x509", "-req", "-in", f"{user}.csr", "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
                 "-out", f"{user}-cert.pem", "-days", "2", "-extfile", f"{user}.ext", cwd=directory)
    _openssl("pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-in", f"{user}-plain.pem", "-out", f"{user}-key.pem",
             "-passout", f"pass:{password}", cwd=directory)
    (directory / f"{user}-plain.pem").unlink()
    pem = directory / f"{user}.pem"
    pem.write_text((directory / f"{user}-cert.pem").read_text() + (directory / f"{user}-key.pem").read_text())
    return ClientCertificate(pem, password)


def self_signed_client(directory: Path, user: str) -> ClientCertificate:
    """A client certificate no test CA signed: what a broker asking for mutual TLS must refuse."""
    directory.mkdir(parents=True, exist_ok=True)
    return _client_certificate(directory, user, None, None)


@dataclass
class MutualTls:
    """Mutual TLS of one cluster: its CA material and a client certificate per user (CN = user)."""

    ca: TestCA
    clients: dict[str, ClientCertificate] = field(default_factory=dict)

    @classmethod
    def create(cls, directory: Path, name: str, users: tuple[str, ...] = ("mirror",)) -> "MutualTls":
        ca = make_test_ca(directory, name, clients=users)
        return cls(ca, dict(ca.clients))

    def scram_arguments(self) -> list[str]:
        return []

    def broker_properties(self, port: int, controller_port: int) -> dict[str, str]:
        """server.properties entries: SSL with required client certificates for clients and the
        broker itself (its own certificate has clientAuth too); the controller stays PLAINTEXT."""
        return {
            "listeners": f"SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"SSL://127.0.0.1:{port}",
            "inter.broker.listener.name": "SSL",
            "listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.ca.keystore),
            "ssl.keystore.password": self.ca.keystore_password,
            "ssl.key.password": self.ca.keystore_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.ca_pem),
            "ssl.client.auth": "required",
            # the certificate's CN is the principal: User:mirror, User:localhost (the broker)
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
            "super.users": ";".join(["User:localhost", *(f"User:{u}" for u in self.clients)]),
        }

    def librdkafka(self, user: str = "mirror", password: str | None = None,
                   certificate: ClientCertificate | None = None) -> dict[str, str]:
        cert = certificate or self.clients[user]
        return {"security.protocol": "SSL", "ssl.ca.location": str(self.ca.ca_pem),
                "ssl.certificate.location": str(cert.pem), "ssl.key.location": str(cert.pem),
                "ssl.key.password": cert.key_password}

    def mm2_properties(self, alias: str, user: str = "mirror",
                       certificate: ClientCertificate | None = None) -> dict[str, str]:
        """The ``<alias>.*`` security keys of an mm2.properties, as MM2 itself reads them."""
        cert = certificate or self.clients[user]
        return {
            f"{alias}.security.protocol": "SSL",
            f"{alias}.ssl.truststore.type": "PEM",
            f"{alias}.ssl.truststore.location": str(self.ca.ca_pem),
            f"{alias}.ssl.keystore.type": "PEM",
            f"{alias}.ssl.keystore.location": str(cert.pem),
            f"{alias}.ssl.key.password": cert.key_password,
        }

    def secrets(self) -> dict[str, str]:
        """Every password and private key line of this cluster by a name, for leak checks."""
        out = {"keystore password": self.ca.keystore_password}
        out.update({f"broker key line {i}": line for i, line in enumerate(self.ca.key_material)})
        for user, cert in self.clients.items():
            out[f"{user} key password"] = cert.key_password
            out.update({f"{user} key line {i}": line for i, line in enumerate(cert.key_material)})
        return out


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
