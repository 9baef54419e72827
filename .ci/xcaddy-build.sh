#!/usr/bin/env bash
# Builds Caddy with fhirgate the way xcaddy does, to prove the plugin builds
# as an *external* module: a temporary `caddy` main module, a generated
# main.go, a `replace` pointing at this checkout, and the flags and
# environment from xcaddy.json. (xcaddy itself is not installable here; its
# `go get <plugin>` step also fails for an unpublished module path, so the
# requirement is written with `go mod edit` and resolved by `go mod tidy -e`.)
#
# Usage: .ci/xcaddy-build.sh [output-binary]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-"$repo/caddy-xcaddy"}
recipe="$repo/xcaddy.json"

field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$recipe" "$1"; }
caddy_version=$(field 'd["caddy_version"]')
plugin=$(field 'd["plugins"][0]["module"]')
mapfile -t flags < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["build_flags"]))' "$recipe")
while IFS='=' read -r k v; do export "$k=$v"; done < <(python3 -c 'import json,sys; [print(f"{k}={v}") for k,v in json.load(open(sys.argv[1]))["env"].items()]' "$recipe")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > main.go <<GO
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// plug in Caddy modules here
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "$plugin"
)

func main() {
	caddycmd.Main()
}
GO
go mod init caddy >/dev/null 2>&1
go mod edit -require="github.com/caddyserver/caddy/v2@$caddy_version"
go mod edit -require="$plugin@v0.0.0-00010101000000-000000000000" -replace="$plugin=$repo"
go mod tidy -e
echo "building Caddy $caddy_version with $plugin (CGO_ENABLED=$CGO_ENABLED, flags: ${flags[*]})"
go build "${flags[@]}" -o "$out" .

modules=$("$out" list-modules)
for m in fhirgate http.handlers.fhirgate admin.api.fhirgate; do
	grep -qx "$m" <<<"$modules" || { echo "module $m missing from the xcaddy-style build" >&2; exit 1; }
done
version=$("$out" version)
case "$version" in
	"$caddy_version"*) ;;
	*) echo "caddy version '$version' does not match the recipe's $caddy_version" >&2; exit 1 ;;
esac
echo "ok: $out ($version) has fhirgate, http.handlers.fhirgate and admin.api.fhirgate"
