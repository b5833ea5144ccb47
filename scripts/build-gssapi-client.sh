#!/usr/bin/env bash
# Builds a Kerberos-capable (SASL GSSAPI) confluent-kafka for sparkmirror's Python side.
#
# The confluent-kafka wheel on PyPI bundles a librdkafka without libsasl2, so it cannot speak
# GSSAPI. This builds librdkafka from source with Cyrus SASL (Debian's libsasl2-dev and its
# GSSAPI module) and confluent-kafka against it, into PREFIX (default .cache/gssapi), and prints
# the directory to put first on PYTHONPATH:
#
#   PYTHONPATH=$(scripts/build-gssapi-client.sh) sparkmirror replicate mm2.properties
#
# Sources, pinned and checked: librdkafka's source as vendored in the npm package
# @confluentinc/kafka-javascript (the newest librdkafka any reachable registry carries), and the
# matching confluent-kafka sdist from PyPI (confluent-kafka 2.16 needs librdkafka 2.16).
# Idempotent: a finished build is reused. Build output goes to PREFIX/build.log; JOBS: make -j.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=$(realpath -m "${1:-.cache/gssapi}")
NPM_PACKAGE=kafka-javascript-1.10.1.tgz
NPM_URL=https://registry.npmjs.org/@confluentinc/kafka-javascript/-/$NPM_PACKAGE
NPM_SHA256=ada7d703bb1d3237e2292bfabf438d663b6160c9f1ac2a2406b5dc4257c81b66
LIBRDKAFKA=2.15.1
CONFLUENT_KAFKA=2.15.1
CONFLUENT_KAFKA_SHA256=99d1223020e27854e75981333983c5120d64762268f8afcc805fbd62e7de49aa
PYTHON=${PYTHON:-.venv/bin/python}

target=$PREFIX/python-$CONFLUENT_KAFKA-librdkafka-$LIBRDKAFKA
if [ -f "$target/.built" ]; then
  echo "$target"
  exit 0
fi

# libsasl2 and its GSSAPI module to build and run with; kinit, which librdkafka runs to get tickets.
scripts/install-system-deps.sh libsasl2-dev libsasl2-modules-gssapi-mit krb5-user libzstd-dev >&2

mkdir -p "$PREFIX"
log=$PREFIX/build.log
: > "$log"
work=$(mktemp -d "$PREFIX/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "build-gssapi-client: $1 (see $log)" >&2; tail -20 "$log" >&2; exit 1; }

echo "== building librdkafka $LIBRDKAFKA with SASL GSSAPI into $PREFIX (once, about two minutes)" >&2
curl -fsSL -o "$work/$NPM_PACKAGE" "$NPM_URL" >>"$log" 2>&1 || fail "cannot download $NPM_URL"
echo "$NPM_SHA256  $work/$NPM_PACKAGE" | sha256sum -c --quiet - >>"$log" 2>&1 || fail "$NPM_PACKAGE: checksum differs"
tar -xzf "$work/$NPM_PACKAGE" -C "$work" package/deps/librdkafka
src=$work/package/deps/librdkafka
lib=$PREFIX/librdkafka-$LIBRDKAFKA
(cd "$src" && ./configure --prefix="$lib" --enable-sasl --disable-curl --disable-lz4-ext) >>"$log" 2>&1 ||
  fail "librdkafka configure failed"
grep -q "define WITH_SASL_CYRUS 1" "$src/config.h" ||
  fail "librdkafka was configured without libsasl2 (is libsasl2-dev installed?)"
make -C "$src/src" -j"${JOBS:-$(nproc)}" >>"$log" 2>&1 || fail "librdkafka build failed"
make -C "$src/src" install >>"$log" 2>&1 || fail "librdkafka install failed"

echo "== building confluent-kafka $CONFLUENT_KAFKA against it" >&2
"$PYTHON" -m pip download -q --no-binary :all: --no-deps "confluent-kafka==$CONFLUENT_KAFKA" -d "$work" >>"$log" 2>&1 ||
  fail "cannot download the confluent-kafka $CONFLUENT_KAFKA sdist"
sdist=$work/confluent_kafka-$CONFLUENT_KAFKA.tar.gz
echo "$CONFLUENT_KAFKA_SHA256  $sdist" | sha256sum -c --quiet - >>"$log" 2>&1 || fail "confluent-kafka sdist: checksum differs"
rm -rf "$target"
C_INCLUDE_PATH=$lib/include LIBRARY_PATH=$lib/lib LDFLAGS="-Wl,-rpath,$lib/lib" \
  "$PYTHON" -m pip install -q --no-deps --no-binary confluent-kafka --target "$target" "$sdist" >>"$log" 2>&1 ||
  fail "confluent-kafka build failed"
PYTHONPATH=$target WANT=$LIBRDKAFKA "$PYTHON" - >>"$log" 2>&1 <<'EOF' || fail "the build cannot create a GSSAPI client"
import os
import confluent_kafka
assert confluent_kafka.libversion()[0] == os.environ["WANT"], confluent_kafka.libversion()
confluent_kafka.Producer({"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "GSSAPI", "sasl.kerberos.kinit.cmd": "true"})
print("GSSAPI client:", confluent_kafka.version(), confluent_kafka.libversion())
EOF
touch "$target/.built"
echo "$target"
