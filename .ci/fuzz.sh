#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for a short fixed time each
# (FUZZTIME, default 5s), failing if any target fails. Targets are found,
# not listed: any `func FuzzXxx(` in a *_test.go file is run in its package.
# A crash leaves the failing input under the package's testdata/fuzz/<Name>/
# and prints how to replay it. Longer runs by hand: FUZZTIME=10m .ci/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
fuzztime="${FUZZTIME:-5s}"

# "<dir> <name>" per target, sorted so runs are comparable.
mapfile -t targets < <(
	grep -r --include='*_test.go' -o '^func Fuzz[A-Za-z0-9_]*' . |
		grep -v '/node_modules/' |
		sed -E 's#^\./(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)$#\1 \2#; s#^\./[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)$#. \1#' |
		sort -u
)
if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz: no targets found"; exit 1
fi

failed=()
start=$(date +%s)
for t in "${targets[@]}"; do
	dir=${t% *}
	name=${t#* }
	printf '== %s in ./%s (%s)\n' "$name" "$dir" "$fuzztime"
	# -run=^$ skips the package's other tests; -fuzz needs exactly one target.
	if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "./$dir" 2>&1 | tail -n 20; then
		failed+=("$name (./$dir)")
	fi
done
printf '\nfuzz: %d targets in %ss\n' "${#targets[@]}" "$(( $(date +%s) - start ))"
if [ "${#failed[@]}" -gt 0 ]; then
	printf 'fuzz: FAILED: %s\n' "${failed[@]}"
	exit 1
fi
