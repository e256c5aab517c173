#!/usr/bin/env bash
# The manual pages say what --help says: for mlp_train and mlp_bench, the long options (--xxx)
# of `PROGRAM --help` and of man/PROGRAM.1 must be the same, two ways:
#   entries:  the options --help lists (lines that begin "  --xxx") and those the man page gives
#             an entry (a .TP paragraph whose first line begins with the option);
#   mentions: every --xxx anywhere in --help and anywhere in the man page (comments aside).
# Each option in one and not the other is named. With groff, the pages must also format without
# warnings.
# Usage: manpage_test.sh MLP_TRAIN MLP_BENCH MAN_DIR
set -u
source "$(dirname "$0")/script_checks.sh" # $work, fail, $failures
man_dir=$3

long_options() { grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; }
# the man page's source as text: no comments, \- as -, no font changes
man_text() { grep -v '^\.\\"' "$1" | sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g'; }
# the option that opens each .TP paragraph
man_entries() { man_text "$1" | awk 'tp { print } { tp = ($0 == ".TP") }' | grep -oE -- '^(\.B[IR]? )?--[a-z][a-z0-9-]*' | long_options; }

# differ WHAT PROGRAM HELP_LIST MAN_LIST: one failure per option on one side only
differ() {
    local what=$1 program=$2
    comm -23 "$3" "$4" >"$work/only_help"
    comm -13 "$3" "$4" >"$work/only_man"
    while read -r option; do
        fail "$program: $option is in --help ($what) but not in $program.1"
    done <"$work/only_help"
    while read -r option; do
        fail "$program: $option is in $program.1 ($what) but not in --help"
    done <"$work/only_man"
}

checked=0
for program in "$1" "$2"; do
    name=$(basename "$program")
    page="$man_dir/$name.1"
    [ -f "$page" ] || { fail "no manual page $page"; continue; }
    "$program" --help >"$work/help" || { fail "$name --help: exit $?"; continue; }
    grep -E -- '^  --[a-z]' "$work/help" | long_options >"$work/help_entries"
    long_options <"$work/help" >"$work/help_mentions"
    man_entries "$page" >"$work/man_entries"
    man_text "$page" | long_options >"$work/man_mentions"
    [ -s "$work/help_entries" ] || fail "$name --help lists no options"
    differ "entries" "$name" "$work/help_entries" "$work/man_entries"
    differ "mentions" "$name" "$work/help_mentions" "$work/man_mentions"
    if command -v groff >/dev/null; then
        warnings=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1)
        [ -z "$warnings" ] || fail "$page: groff warns: $warnings"
    fi
    checked=$((checked + $(wc -l <"$work/help_entries")))
done

if [ $failures -ne 0 ]; then
    echo "manpage_test: $failures differences between --help and the manual pages" >&2
    exit 1
fi
echo "manpage_test: the $checked options of mlp_train and mlp_bench --help match their manual pages"
