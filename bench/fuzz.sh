#!/bin/sh
# fuzz.sh: runs every fuzz target of the module for a while, one at a time
# (-parallel 1), starting from the corpus kept in testdata/fuzzcorpus and
# writing what it finds back there, so that the corpus grows from run to
# run and machine to machine. Go keeps a fuzzing corpus in its build cache
# ($GOCACHE/fuzz); testdata/fuzzcorpus is that tree for this module. (It
# is not testdata/fuzz: every go test run replays those inputs as seeds,
# and hundreds of random programs would make the suite slow.) A failing
# input is still written to the package's testdata/fuzz, where it stays a
# seed once fixed.
#
#   bench/fuzz.sh [duration] [pkg:Target ...]    (default 10m, every target)
#
# Exits non-zero if a target fails; the others still run.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
dur=${1:-10m}
[ $# -gt 0 ] && shift
cache="$(go env GOCACHE)/fuzz/github.com/gocomm/comm"
mkdir -p "$cache"
cp -R testdata/fuzzcorpus/. "$cache/"
targets="$*"
if [ -z "$targets" ]; then
	targets=$(grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do
		d=$(dirname "$f")
		sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$f" | sed "s|^|$d:|"
	done | sort)
fi
rc=0
for spec in $targets; do
	pkg=${spec%%:*} t=${spec##*:}
	echo "== $(date -u +%H:%M:%S) $pkg $t ($dur)"
	go test -run "^$t\$" -fuzz "^$t\$" -fuzztime "$dur" -parallel 1 "$pkg" || rc=1
done
cp -R "$cache/." testdata/fuzzcorpus/
exit $rc
