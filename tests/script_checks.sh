# Sourced by the test scripts that run several checks and report every failure before they
# exit: a scratch folder $work, removed on exit; `fail MESSAGE`, which prints FAIL: MESSAGE and
# counts it in $failures (each script ends with `[ $failures -eq 0 ] || exit 1` or its own
# summary).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}
