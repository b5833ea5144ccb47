"""Kerberos for the test clusters: an MIT KDC of a realm of its own on loopback, keytabs, and
the broker settings for a SASL GSSAPI listener.

The KDC is Debian's ``krb5kdc`` run as a plain process on a free port, with its database,
stash, config and log in one directory; nothing under /etc is read or written (clients are
pointed at its ``krb5.conf`` through ``KRB5_CONFIG`` and ``-Djava.security.krb5.conf``).
Tickets live ``max_life`` (default two minutes), so a run of a few minutes spans several
ticket lifetimes, and brokers that make every connection re-authenticate that often or more
(``connections.max.reauth.ms``) prove that the clients renew them.

A cluster with :class:`Kerberos` keeps its PLAINTEXT listener for the tests' own clients
(the PyPI confluent-kafka they use has no GSSAPI) and adds a SASL_PLAINTEXT listener with
GSSAPI only, advertised as ``localhost``: the host part of the broker's service principal
``kafka/localhost``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from sparkmirror.errors import ClusterError

REALM = "SPARKMIRROR.TEST"
SERVICE = "kafka"
HOST = "localhost"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
KDC_BINARIES = ("krb5kdc", "kdb5_util", "kadmin.local")
KDC_PACKAGES = "krb5-kdc krb5-admin-server krb5-user"


def _binary(name: str) -> str:
    for d in ("/usr/sbin", "/usr/bin", "/sbin"):
        if (Path(d) / name).exists():
            return str(Path(d) / name)
    found = shutil.which(name)
    if found is None:
        raise ClusterError(f"{name} not found: the test KDC needs MIT Kerberos",
                           hint=f"scripts/install-system-deps.sh {KDC_PACKAGES}")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Kdc:
    """A running KDC of realm ``REALM``; ``keytab(principal)`` creates a principal and its keytab."""

    directory: Path
    port: int
    max_life: str = "2m"
    #: the brokers make a GSSAPI connection re-authenticate (a fresh service ticket) this often
    reauth_ms: int = 60_000
    process: subprocess.Popen | None = None

    @property
    def krb5_conf(self) -> Path:
        return self.directory / "krb5.conf"

    @property
    def log_file(self) -> Path:
        return self.directory / "kdc.log"

    @classmethod
    def start(cls, directory: Path, max_life: str = "2m", reauth_ms: int = 60_000) -> "Kdc":
        kdc = cls(directory, _free_port(), max_life, reauth_ms)
        kdc._configure()
        kdc._run()
        return kdc

    def env(self, ccache: Path | None = None) -> dict[str, str]:
        """What a process needs to find this realm: librdkafka's kinit reads ``KRB5_CONFIG`` (and
        its ticket cache ``KRB5CCNAME``), Java reads ``java.security.krb5.conf``."""
        out = {"KRB5_CONFIG": str(self.krb5_conf)}
        if ccache is not None:
            out["KRB5CCNAME"] = f"FILE:{ccache}"
        return out

    def java_option(self) -> str:
        return f"-Djava.security.krb5.conf={self.krb5_conf}"

    def _configure(self) -> None:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        (d / "kdc.conf").write_text(
            "[kdcdefaults]\n"
            f" kdc_listen = 127.0.0.1:{self.port}\n"
            f" kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            "[realms]\n"
            f" {REALM} = {{\n"
            f"  database_name = {d / 'principal'}\n"
            f"  key_stash_file = {d / 'stash'}\n"
            f"  acl_file = {d / 'kadm5.acl'}\n"
            f"  max_life = {self.max_life}\n"
            "  max_renewable_life = 0\n"
            "  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            " }\n"
            "[logging]\n"
            f" kdc = FILE:{self.log_file}\n")
        (d / "kadm5.acl").write_text("")
        # No DNS, no reverse lookups: the service principal's host is exactly what the client
        # connected to. TCP first: the KDC and Java both speak it, and replies never truncate.
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f" default_realm = {REALM}\n"
            " dns_lookup_realm = false\n"
            " dns_lookup_kdc = false\n"
            " dns_canonicalize_hostname = false\n"
            " rdns = false\n"
            " udp_preference_limit = 1\n"
            "[realms]\n"
            f" {REALM} = {{\n  kdc = 127.0.0.1:{self.port}\n }}\n"
            "[domain_realm]\n"
            f" {HOST} = {REALM}\n")

    def _tool_env(self) -> dict[str, str]:
        return dict(os.environ, KRB5_CONFIG=str(self.krb5_conf), KRB5_KDC_PROFILE=str(self.directory / "kdc.conf"))

    def _tool(self, *argv: str) -> str:
        done = subprocess.run(list(argv), env=self._tool_env(), capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise ClusterError(f"{Path(argv[0]).name} failed: {(done.stderr or done.stdout).strip()[:500]}")
        return done.stdout

    def _run(self) -> None:
        self._tool(_binary("kdb5_util"), "create", "-s", "-r", REALM, "-P", secrets.token_hex(16))
        log = open(self.directory / "krb5kdc.out", "ab")
        self.process = subprocess.Popen([_binary("krb5kdc"), "-n", "-r", REALM], env=self._tool_env(),
                                        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise ClusterError(f"the KDC did not start; see {self.directory / 'krb5kdc.out'} "
                                       f"and {self.log_file}") from None
                time.sleep(0.1)

    def keytab(self, principal: str, path: Path | None = None, new_key: bool = False) -> Path:
        """Write a keytab of ``principal``, creating it (a random key) if the realm has none;
        ``new_key``: give it a new key first, which makes every earlier keytab of it stale."""
        name = f"{principal}@{REALM}" if "@" not in principal else principal
        path = path or self.directory / f"{principal.replace('/', '_')}.keytab"
        admin = _binary("kadmin.local")
        known = name in self._tool(admin, "-r", REALM, "-q", "listprincs").split()
        if not known:
            self._tool(admin, "-r", REALM, "-q", f"addprinc -randkey {name}")
        keep = "" if new_key or not known else "-norandkey "
        self._tool(admin, "-r", REALM, "-q", f"ktadd -k {path} {keep}{name}")
        return path

    def issued(self, principal: str) -> int:
        """How many initial tickets (AS requests) the KDC has issued to ``principal``."""
        name = f"{principal}@{REALM}"
        text = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        return sum(1 for line in text.splitlines() if "AS_REQ" in line and "ISSUE" in line and f" {name} for" in line)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def jaas(keytab: Path, principal: str) -> str:
    return (f'{KRB5_MODULE} required useKeyTab=true storeKey=true keyTab="{keytab}" '
            f'principal="{principal}@{REALM}";')


@dataclass
class Kerberos:
    """The Kerberos side of one cluster: the KDC, the broker's keytab, its GSSAPI listener's
    port, and a keytab per client principal."""

    kdc: Kdc
    port: int
    broker_keytab: Path
    users: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def create(cls, kdc: Kdc, name: str, users: tuple[str, ...] = ("mirror",)) -> "Kerberos":
        broker = kdc.keytab(f"{SERVICE}/{HOST}", kdc.directory / f"{name}-broker.keytab")
        return cls(kdc, _free_port(), broker, {u: kdc.keytab(u) for u in users})

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def broker_properties(self, port: int, controller_port: int) -> dict[str, str]:
        """server.properties entries: the PLAINTEXT listener on ``port`` stays (inter-broker and
        the tests' clients); a SASL_PLAINTEXT listener takes GSSAPI clients only."""
        return {
            "listeners": (f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://{HOST}:{self.port},"
                          f"CONTROLLER://127.0.0.1:{controller_port}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://{HOST}:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "GSSAPI",
            "sasl.kerberos.service.name": SERVICE,
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas(self.broker_keytab, f"{SERVICE}/{HOST}"),
            "connections.max.reauth.ms": str(self.kdc.reauth_ms),
            "super.users": ";".join(["User:ANONYMOUS", *(f"User:{u}" for u in self.users)]),
        }

    def mm2_properties(self, alias: str, user: str = "mirror", keytab: Path | None = None,
                       principal: str | None = None) -> dict[str, str]:
        """The ``<alias>.*`` keys of an mm2.properties, as MM2 itself reads them."""
        return {
            f"{alias}.bootstrap.servers": self.bootstrap,
            f"{alias}.security.protocol": "SASL_PLAINTEXT",
            f"{alias}.sasl.mechanism": "GSSAPI",
            f"{alias}.sasl.kerberos.service.name": SERVICE,
            f"{alias}.sasl.jaas.config": jaas(keytab or self.users[user], principal or user),
        }
