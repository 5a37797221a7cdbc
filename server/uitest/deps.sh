#!/usr/bin/env bash
# deps.sh installs what the dashboard's browser test needs, idempotently
# (`make ui-test`): Debian's chromium (and node/npm if missing) through
# apt-get, and playwright-core into an ignored folder (default .deps/ui)
# through npm. No browser is ever downloaded by a test tool: playwright-core
# ships none, and the test drives /usr/bin/chromium. Uses sudo only when not
# root; does nothing when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/../.."

PREFIX="${SLUICE_UI_DEPS:-.deps/ui}"
PLAYWRIGHT_VERSION=1.64.1

SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi

apt_missing=()
if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q 'install ok installed'; then apt_missing+=(chromium); fi
if ! command -v node >/dev/null 2>&1; then apt_missing+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then apt_missing+=(npm); fi
if [ ${#apt_missing[@]} -gt 0 ]; then
	echo "ui-deps: installing Debian packages: ${apt_missing[*]}"
	"${SUDO[@]}" apt-get update
	DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y "${apt_missing[@]}"
fi

pkg="$PREFIX/node_modules/playwright-core/package.json"
if ! [ -f "$pkg" ] || ! grep -q "\"version\": \"$PLAYWRIGHT_VERSION\"" "$pkg"; then
	echo "ui-deps: installing playwright-core@$PLAYWRIGHT_VERSION into $PREFIX"
	mkdir -p "$PREFIX"
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$PREFIX" --no-audit --no-fund --save-exact \
		"playwright-core@$PLAYWRIGHT_VERSION"
fi
