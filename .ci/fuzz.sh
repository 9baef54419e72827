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

# fuzz_once runs one target and prints the end of its output; its status is
# go test's.
fuzz_once() {
	# -run=^$ skips the package's other tests; -fuzz needs exactly one target.
	go test -run='^$' -fuzz="^$2\$" -fuzztime="$fuzztime" "./$1" >"$out" 2>&1
	local status=$?
	tail -n 20 "$out"
	return $status
}

# crashers counts the inputs a target saved under its testdata/fuzz.
crashers() { { find "$1/testdata/fuzz/$2" -type f 2>/dev/null || true; } | wc -l; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=()
start=$(date +%s)
for t in "${targets[@]}"; do
	dir=${t% *}
	name=${t#* }
	printf '== %s in ./%s (%s)\n' "$name" "$dir" "$fuzztime"
	saved=$(crashers "$dir" "$name")
	if fuzz_once "$dir" "$name"; then
		continue
	fi
	# Go's fuzzing engine can fail a run whose time ran out while it was
	# restarting or minimizing in a worker, with "context deadline exceeded"
	# and no failing input. That says nothing about the target: run it once
	# more. Any other failure, or one that saved an input, stands.
	if [ "$(crashers "$dir" "$name")" = "$saved" ] && grep -q '^    context deadline exceeded$' "$out" &&
		[ "$(grep -c '^--- FAIL' "$out")" = 1 ]; then
		echo "fuzz: $name stopped on the engine's deadline with no failing input; running it again"
		fuzz_once "$dir" "$name" && continue
	fi
	failed+=("$name (./$dir)")
done
printf '\nfuzz: %d targets in %ss\n' "${#targets[@]}" "$(( $(date +%s) - start ))"
if [ "${#failed[@]}" -gt 0 ]; then
	printf 'fuzz: FAILED: %s\n' "${failed[@]}"
	exit 1
fi
