#!/bin/sh
# fuzz.sh: runs every fuzz target of the module for a while, one at a time
# (-parallel 1). The long-running corpus is not part of the tree: it lives
# in Go's fuzz cache ($(go env GOCACHE)/fuzz/github.com/gocomm/comm/<pkg>/
# <Target>), where go test -fuzz reads and grows it from run to run on this
# machine (go clean -fuzzcache drops it). With FUZZ_CORPUS=dir it is also
# copied from dir into the cache before the run and back after, to carry
# it between machines or keep it from a cache clean; dir has the cache's
# layout and is not to be committed.
#
# What the tree keeps are the regression inputs in each package's
# testdata/fuzz/<Target>, which every go test replays (a few dozen per
# target at most, 2 MB in all: house_test.go checks). A failing input is
# written there by go test itself: fix the bug and commit the input. To
# promote an input from the cache that reaches code the committed ones do
# not (or that once failed), copy the file:
#
#   cp "$(go env GOCACHE)/fuzz/github.com/gocomm/comm/<pkg>/<Target>/<hash>" <pkg>/testdata/fuzz/<Target>/
#   go test -run '^<Target>$' ./<pkg>
#
#   bench/fuzz.sh [duration] [pkg:Target ...]    (default 10m, every target)
#   FUZZ_CORPUS=~/gocomm-fuzz bench/fuzz.sh 1h
#
# Exits non-zero if a target fails; the others still run.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
dur=${1:-10m}
[ $# -gt 0 ] && shift
cache="$(go env GOCACHE)/fuzz/github.com/gocomm/comm"
mkdir -p "$cache"
corpus=${FUZZ_CORPUS:-}
if [ -n "$corpus" ]; then
	mkdir -p "$corpus" && cp -R "$corpus/." "$cache/"
fi
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
if [ -n "$corpus" ]; then
	cp -R "$cache/." "$corpus/"
fi
exit $rc
