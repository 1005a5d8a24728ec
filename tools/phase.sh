#!/usr/bin/env bash
# Runs one phase of `make test` and records how long it took, so that growth is visible:
#   tools/phase.sh NAME COMMAND...   runs COMMAND, appends "NAME SECONDS STATUS" to
#                                    build/phase-times.txt, exits with COMMAND's status
#   tools/phase.sh --report          prints the recorded phases as a table, then forgets them
#   tools/phase.sh --reset           forgets them
set -uo pipefail
log=build/phase-times.txt
mkdir -p build
case "${1:-}" in
  --reset) rm -f "$log"; exit 0 ;;
  --report)
    [ -f "$log" ] || exit 0
    echo "== time per phase =="
    # A phase named background-* ran beside the others: shown, not added to the total.
    awk '{ beside = ($1 ~ /^background/)
           printf "  %-20s %8.1f s  %s%s\n", $1, $2, ($3 == 0 ? "ok" : "FAILED (" $3 ")"),
                  (beside ? " (beside pytest, not in the total)" : "")
           if (!beside) total += $2 }
         END { printf "  %-20s %8.1f s\n", "total (wall)", total }' "$log"
    rm -f "$log"
    exit 0 ;;
esac
name=$1
shift
start=$(date +%s.%N)
"$@"
status=$?
end=$(date +%s.%N)
seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
echo "$name $seconds $status" >> "$log"
echo "== phase $name: $seconds s =="
exit $status
