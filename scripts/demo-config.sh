#!/usr/bin/env bash
# Prints the path of a proxy configuration for the sandbox: config/demo.toml, or, when the
# sandbox runs on other ports (ROUTEKEY_DS0_PORT / ROUTEKEY_DS1_PORT), a copy of it with
# those ports (and that folder's TLS files), written into the sandbox folder.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
ds0="${ROUTEKEY_DS0_PORT:-33061}"
ds1="${ROUTEKEY_DS1_PORT:-33062}"
if [[ "$ds0" == 33061 && "$ds1" == 33062 && -z "${ROUTEKEY_SANDBOX_DIR:-}" ]]; then
    printf '%s\n' "$repo/config/demo.toml"
    exit 0
fi
dir="${ROUTEKEY_SANDBOX_DIR:-$repo/.sandbox}"
case "$dir" in /*) ;; *) dir="$repo/$dir" ;; esac
mkdir -p "$dir"
sed -e "s/127\.0\.0\.1:33061/127.0.0.1:$ds0/" -e "s/127\.0\.0\.1:33062/127.0.0.1:$ds1/" \
    -e "s#\"\.sandbox/tls/#\"$dir/tls/#" \
    "$repo/config/demo.toml" > "$dir/demo.toml"
printf '%s\n' "$dir/demo.toml"
