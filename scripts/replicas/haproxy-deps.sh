#!/usr/bin/env bash
# haproxy-deps.sh installs Debian's haproxy (2.6 on bookworm) for `make
# replicas-test` and `make deploy-test`, idempotently: nothing happens when it is there. Nothing is
# downloaded except through apt-get; sudo only when not root.
set -euo pipefail
if command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ]; then exit 0; fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
echo "haproxy-deps: installing the Debian package haproxy"
"${SUDO[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends haproxy
