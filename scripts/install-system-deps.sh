#!/usr/bin/env bash
# System packages the test suite needs beyond Python, Java and the cached jars:
#
#   prometheus               prometheus + promtool (alert-rule unit tests, live stack test)
#   prometheus-alertmanager  the pager path (Prometheus -> Alertmanager -> webhook)
#   chromium                 headless browser for the status-page test
#   openssl                  the CLI that makes throwaway CAs and certificates (TLS tests, SASL_SSL dev clusters)
#   krb5-kdc krb5-admin-server  an MIT KDC and kadmin.local for the Kerberos tests' realm
#                               (scripts/build-gssapi-client.sh installs what the GSSAPI client needs)
#
# Idempotent: packages already installed are skipped, and `apt-get update` runs
# only when apt does not know a wanted package yet or the install failed on
# stale lists. Runs as root, or through sudo when available. Only Debian/Ubuntu
# (apt) is supported; elsewhere it says what to install and exits 1.
#
# Usage: scripts/install-system-deps.sh [PACKAGE...]   (default: all of the above)
set -euo pipefail

PACKAGES=("$@")
if [ ${#PACKAGES[@]} -eq 0 ]; then
  PACKAGES=(prometheus prometheus-alertmanager chromium openssl krb5-kdc krb5-admin-server)
fi

installed() {
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = "installed" ]
}

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: no apt/dpkg on this machine; install ${PACKAGES[*]} yourself" >&2
  echo "  (promtool, prometheus and alertmanager must be on PATH or in /usr/bin)" >&2
  exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  installed "$pkg" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "== system packages present: ${PACKAGES[*]}"
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install-system-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
APT=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get)

known() {  # apt has a candidate version for every missing package
  local pkg
  for pkg in "${missing[@]}"; do
    apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [^(]' || return 1
  done
}

updated=0
if ! known; then
  echo "== apt-get update (apt does not know: ${missing[*]})"
  "${APT[@]}" update -qq
  updated=1
fi

echo "== installing system packages: ${missing[*]}"
# --no-install-recommends: no node-exporter or other extras the tests do not use.
if ! "${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}"; then
  if [ "$updated" -eq 1 ]; then
    exit 1
  fi
  echo "== install failed; retrying after apt-get update (lists may be stale)"
  "${APT[@]}" update -qq
  "${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}"
fi
