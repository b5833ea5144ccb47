"""Which option maps the driver JVM's class-data archive (replicator.datapath.cds).

That the JVM really maps it is test_datapath's (the replicator's JVM has the file mapped).
"""

from __future__ import annotations

from replicator.datapath import cds
from replicator.settings import ReplicatorSettings


def test_no_archive_no_option(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKMIRROR_CACHE", str(tmp_path))
    assert not cds.archive_path().exists()
    assert cds.java_options() == ""


def test_an_archive_for_this_setup_is_mapped_unless_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKMIRROR_CACHE", str(tmp_path))
    path = cds.archive_path()
    assert path.parent == tmp_path / "cds"
    path.parent.mkdir()
    path.write_bytes(b"archive")
    assert cds.java_options().split()[0] == f"-XX:SharedArchiveFile={path}"
    assert cds.java_options(ReplicatorSettings.from_environment({"SPARKMIRROR_CDS": "auto"}).class_data_archive)
    assert cds.java_options(ReplicatorSettings.from_environment({"SPARKMIRROR_CDS": "off"}).class_data_archive) == ""


def test_the_archive_name_follows_the_java_it_was_made_by(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKMIRROR_CACHE", str(tmp_path))
    before = cds.archive_path()
    other = tmp_path / "java"
    other.write_text("#!/bin/sh\n")
    monkeypatch.setattr(cds.artifacts, "java_binary", lambda: str(other))
    assert cds.archive_path() != before


def test_a_reinstalled_jar_asks_for_a_new_archive(tmp_path, monkeypatch):
    """The JVM refuses an archive once a jar on its class path changed; the name changes with it."""
    monkeypatch.setenv("SPARKMIRROR_CACHE", str(tmp_path))
    jars = tmp_path / "jars" / cds.artifacts.SPARK_KAFKA.name
    jars.mkdir(parents=True)
    jar = jars / "connector.jar"
    jar.write_bytes(b"v1")
    before = cds.archive_path()
    jar.write_bytes(b"v2 ")
    assert cds.archive_path() != before
