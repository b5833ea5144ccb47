"""Pinned third-party artifacts and the cache that holds them.

Everything sparkmirror needs from Maven Central — the Kafka broker and tools, Apache
MirrorMaker 2 (our reference peer) and Spark's Kafka connector — is fetched once by
``mvn`` into a git-ignored cache folder and reused from there. Versions are pinned
here and nowhere else.

The replicator needs the connector jars at run time (``replicator.datapath``), the
dev clusters and the MM2 runner (``devenv/`` in the source checkout, not in the wheel)
need the Kafka jars: both import this module, and the run-time code never imports the
dev tooling.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sparkmirror.errors import SparkmirrorError

log = logging.getLogger(__name__)

KAFKA_VERSION = "4.3.1"
SPARK_VERSION = "4.2.0"  # must equal the pinned pyspark; the connector jars follow it
SCALA_BINARY = "2.13"
LOG4J_VERSION = "2.24.3"
SLF4J_VERSION = "2.0.17"

REPO_ROOT = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    """The download cache: $SPARKMIRROR_CACHE; else ``.cache/`` in a source checkout (the
    git-ignored folder ``./run`` fills); else, for an installed wheel, whose package folder
    lives in site-packages and must not be written to, ``$XDG_CACHE_HOME/sparkmirror``
    (``~/.cache/sparkmirror``)."""
    env = os.environ.get("SPARKMIRROR_CACHE")
    if env:
        return Path(env).expanduser().resolve()
    if (REPO_ROOT / "pyproject.toml").is_file():
        return REPO_ROOT / ".cache"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser().resolve() / "sparkmirror"


@dataclass(frozen=True)
class JarSet:
    """A named set of Maven artifacts fetched with their runtime dependencies."""

    name: str
    artifacts: tuple[str, ...]  # groupId:artifactId:version
    # Keep only these artifactIds (prefixes) from the resolved closure; None keeps all.
    keep: tuple[str, ...] | None = None

    @property
    def directory(self) -> Path:
        return cache_dir() / "jars" / self.name

    def classpath(self) -> str:
        return str(self.directory / "*")

    def jars(self) -> list[Path]:
        return sorted(self.directory.glob("*.jar"))


# Broker, admin tools and Apache MirrorMaker 2 (dedicated mode) share one classpath,
# like the lib/ folder of Kafka's binary distribution. Logging goes to log4j2.
KAFKA = JarSet(
    name=f"kafka-{KAFKA_VERSION}",
    artifacts=(
        f"org.apache.kafka:kafka_{SCALA_BINARY}:{KAFKA_VERSION}",
        f"org.apache.kafka:kafka-server:{KAFKA_VERSION}",
        f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}",
        f"org.apache.kafka:connect-mirror:{KAFKA_VERSION}",
        f"org.apache.kafka:connect-runtime:{KAFKA_VERSION}",
        f"org.apache.logging.log4j:log4j-slf4j2-impl:{LOG4J_VERSION}",
        f"org.slf4j:slf4j-api:{SLF4J_VERSION}",
    ),
)

# Spark's Kafka source. pyspark already ships Scala, Hadoop, compression codecs and
# slf4j; only the connector's own jars are added to the Spark classpath.
SPARK_KAFKA = JarSet(
    name=f"spark-kafka-{SPARK_VERSION}",
    artifacts=(f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{SPARK_VERSION}",),
    keep=("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2"),
)

ALL_SETS = (KAFKA, SPARK_KAFKA)

#: Other Kafka releases the compatibility tests run brokers of (tests/integration/test_compat_matrix.py):
#: the oldest line still widely run (3.9, the last with ZooKeeper mode too), the previous 4.x line
#: and the newest broker release (4.4.0's connect-mirror is not on Maven Central, so MM2 stays at
#: KAFKA_VERSION).
COMPAT_VERSIONS = ("3.9.2", "4.2.1", "4.4.0")


def kafka_broker_jars(version: str = KAFKA_VERSION) -> JarSet:
    """The broker and its tools of one Kafka release (MM2 too for the pinned one)."""
    if version == KAFKA_VERSION:
        return KAFKA
    # Kafka 3.x logs through log4j 1's API: log4j-1.2-api routes it to log4j2, so one config
    # file serves every version.
    bridge = (f"org.apache.logging.log4j:log4j-1.2-api:{LOG4J_VERSION}",) if version.startswith(("2.", "3.")) else ()
    return JarSet(
        name=f"kafka-broker-{version}",
        artifacts=(
            f"org.apache.kafka:kafka_{SCALA_BINARY}:{version}",
            f"org.apache.kafka:kafka-server:{version}",
            f"org.apache.kafka:kafka-tools:{version}",
            f"org.apache.logging.log4j:log4j-slf4j2-impl:{LOG4J_VERSION}",
            f"org.slf4j:slf4j-api:{SLF4J_VERSION}",
            *bridge,
        ),
    )

# Some parent POMs (Spark's) name extra repositories this machine cannot reach;
# resolving everything through Maven Central alone keeps the fetch deterministic.
_SETTINGS_XML = """<settings><mirrors><mirror><id>central-only</id><mirrorOf>*</mirrorOf>
<url>https://repo1.maven.org/maven2</url></mirror></mirrors></settings>
"""

_POM_TEMPLATE = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sparkmirror</groupId><artifactId>fetch-{name}</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


def _pom(jar_set: JarSet) -> str:
    deps = []
    for coord in jar_set.artifacts:
        group, artifact, version = coord.split(":")
        deps.append(
            f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return _POM_TEMPLATE.format(name=jar_set.name, deps="\n".join(deps))


def _complete_marker(jar_set: JarSet) -> Path:
    return jar_set.directory / ".complete"


def ensure(jar_set: JarSet) -> JarSet:
    """Fetch ``jar_set`` into the cache unless it is already complete there.

    One fetch per set at a time, across threads and processes (two clusters of one version
    starting together): the second waits for the first and then finds the set complete, where
    it would otherwise have replaced the folder under the first one's running JVM."""
    if _complete_marker(jar_set).exists():
        return jar_set
    lock_path = jar_set.directory.with_name(f".{jar_set.name}.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete_marker(jar_set).exists():
            return jar_set
        return _fetch(jar_set)


def _fetch(jar_set: JarSet) -> JarSet:
    mvn = shutil.which("mvn")
    if not mvn:
        raise SparkmirrorError(
            f"cannot fetch {jar_set.name}: 'mvn' is not on PATH",
            hint="install Maven (apt-get install maven) or put the jars in " + str(jar_set.directory),
        )
    log.info("fetching %s from Maven Central into %s (once)", jar_set.name, jar_set.directory)
    with tempfile.TemporaryDirectory(prefix="sparkmirror-fetch-") as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(_pom(jar_set))
        (work / "settings.xml").write_text(_SETTINGS_XML)
        out = work / "libs"
        cmd = [
            mvn, "-q", "-B", "-s", str(work / "settings.xml"), "-f", str(work / "pom.xml"),
            "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={out}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
            raise SparkmirrorError(
                f"mvn could not fetch {jar_set.name}: {tail}",
                hint="check that Maven Central is reachable; the command was: " + " ".join(cmd),
            )
        jars = sorted(out.glob("*.jar"))
        if jar_set.keep is not None:
            jars = [j for j in jars if j.name.startswith(jar_set.keep)]
        # slf4j 1.x bindings in the closure would shadow log4j2's slf4j2 binding.
        jars = [j for j in jars if not j.name.startswith(("slf4j-api-1.", "slf4j-reload4j", "reload4j"))]
        target = jar_set.directory
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for jar in jars:
            shutil.copy2(jar, staging / jar.name)
        (staging / ".complete").write_text("\n".join(j.name for j in jars) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    log.info("fetched %s: %d jars", jar_set.name, len(jar_set.jars()))
    return jar_set


def ensure_all() -> None:
    for jar_set in ALL_SETS:
        ensure(jar_set)


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise SparkmirrorError("java is not on PATH", hint="install a JDK 17 or newer")
    return java
