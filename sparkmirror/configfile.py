"""mm2.properties from disk: reading the file and resolving its config providers.

The MM2 model (:mod:`sparkmirror.model.config`) parses text and layers settings
without touching files or the environment. What needs the machine lives here:

* :func:`load_config` reads the file the way Java does (UTF-8, else ISO-8859-1)
  and hands the model a resolver for ``${provider:path:key}`` references;
* :func:`resolve_references` is that resolver, for the three providers Kafka
  ships (FileConfigProvider, DirectoryConfigProvider, EnvVarConfigProvider),
  as MM2's ConfigTransformer applies them. It runs when a client's settings are
  layered, so a secret is read only for the clients that use it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from sparkmirror.errors import ConfigError, ConfigErrors
from sparkmirror.model.clients import REFERENCE, ClientErrors, JavaClientConfig
from sparkmirror.model.config import MM2Config
from sparkmirror.model.parse import parse_config
from sparkmirror.model.properties import parse_properties


def load_config(path: str | Path) -> MM2Config:
    """Read and validate an mm2.properties file (UTF-8; Latin-1 if it is not UTF-8, as Java reads it)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigErrors([ConfigError(f"cannot read the configuration: {exc.strerror or exc}", file=str(path),
                                        hint="give the path of an mm2.properties file")]) from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigErrors([ConfigError(
            "the file is UTF-16 (it starts with a UTF-16 byte-order mark); MM2 reads mm2.properties as "
            "ISO-8859-1 and would find no setting in it", file=str(path), line=1,
            hint="save it as UTF-8 or plain ASCII text")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_config(text, str(path), resolve_references=resolve_references)


def resolve_references(java: Mapping[str, str], providers: Mapping[str, str], *, cluster: str | None = None
                       ) -> JavaClientConfig:
    """Replace ``${provider:path:key}`` like MM2's ConfigTransformer does, for the providers it ships.

    ``providers`` maps a provider name from ``config.providers`` to its class.
    A reference that cannot be resolved is an error here (MM2 would pass the
    literal text on and fail to authenticate much later).
    """
    errors = ClientErrors(java, cluster)
    out = JavaClientConfig(java, cluster=getattr(java, "cluster", cluster), role=getattr(java, "role", None),
                           origins=getattr(java, "origins", {}))
    for key, value in java.items():
        def replace(match: re.Match, key: str = key) -> str:
            name, path, item = match.group(1), match.group(2) or "", match.group(3)
            try:
                return _provide(providers, name, path, item)
            except (LookupError, OSError, ValueError, ConfigError) as exc:
                errors.add(key, f"cannot resolve {match.group(0)} in `{key}`: {exc}")
                return match.group(0)
        out[key] = REFERENCE.sub(replace, value)
    errors.raise_if_any()
    return out


def _provide(providers: Mapping[str, str], name: str, path: str, item: str) -> str:
    if name not in providers:
        raise LookupError(f"provider {name!r} is not declared in config.providers")
    cls = providers[name].rsplit(".", 1)[-1]
    if cls == "FileConfigProvider":
        entries = parse_properties(Path(path).read_text(encoding="utf-8"), path)
        if item not in entries:
            raise LookupError(f"{path} has no key {item!r}")
        return entries[item].value
    if cls == "DirectoryConfigProvider":
        return (Path(path) / item).read_text(encoding="utf-8")
    if cls == "EnvVarConfigProvider":
        if item not in os.environ:
            raise LookupError(f"environment variable {item} is not set")
        return os.environ[item]
    raise LookupError(f"config provider class {providers[name]} is not supported by sparkmirror "
                      "(FileConfigProvider, DirectoryConfigProvider and EnvVarConfigProvider are)")
