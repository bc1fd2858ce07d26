#!/usr/bin/env bash
# Installs Debian's postgresql server where its binaries are missing (the Postgres store's tests
# start throw-away clusters with them). Idempotent; needs root (apt-get) only when it installs.
set -euo pipefail
if compgen -G "/usr/lib/postgresql/*/bin/initdb" > /dev/null || command -v initdb > /dev/null; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq postgresql > /dev/null
