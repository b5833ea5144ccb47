"""Throwaway TLS material for tests, made with the openssl CLI: a CA and certificates it signs.

``make_pki(folder)`` writes ``ca.crt``/``ca.key``, a server certificate for
127.0.0.1 and localhost (``server.crt``/``server.key``) and a client
certificate (``client.crt``/``client.key``), EC P-256 so it takes milliseconds.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Pki:
    folder: Path
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl not found: install the Debian package openssl", pytrace=False)
    subprocess.run([openssl, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _signed(folder: Path, name: str, subject: str, extensions: str) -> None:
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=folder)
    (folder / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=folder)


def make_pki(folder: Path) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=sparkmirror test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=folder)
    _signed(folder, "server", "/CN=localhost",
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _signed(folder, "client", "/CN=prometheus",
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n")
    return Pki(folder, folder / "ca.crt", folder / "server.crt", folder / "server.key",
               folder / "client.crt", folder / "client.key")
