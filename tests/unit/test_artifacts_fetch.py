"""Fetching a pinned jar set into the cache: once, whoever asks at the same time."""

from __future__ import annotations

import shutil
import threading

import pytest

from sparkmirror import artifacts


@pytest.mark.skipif(shutil.which("mvn") is None, reason="needs Maven, as ./run does")
def test_two_threads_fetching_one_set_both_get_it_whole_and_it_is_fetched_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKMIRROR_CACHE", str(tmp_path))
    jar_set = artifacts.JarSet(name="probe-slf4j", artifacts=(f"org.slf4j:slf4j-api:{artifacts.SLF4J_VERSION}",))
    fetches, seen, errors = [], [], []
    real_fetch = artifacts._fetch

    def counting_fetch(js):
        fetches.append(js.name)
        return real_fetch(js)

    monkeypatch.setattr(artifacts, "_fetch", counting_fetch)

    def ask():
        try:
            artifacts.ensure(jar_set)
            seen.append([j.name for j in jar_set.jars()])  # what a JVM started now would find
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert errors == []
    assert fetches == ["probe-slf4j"]
    assert seen == [[f"slf4j-api-{artifacts.SLF4J_VERSION}.jar"]] * 2
