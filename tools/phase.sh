#!/usr/bin/env bash
# Runs one phase of `make test` and records how long it took, so that growth is visible:
#   tools/phase.sh NAME COMMAND...   runs COMMAND, appends "NAME SECONDS STATUS" to
#                                    build/phase-times.txt, exits with COMMAND's status
#   tools/phase.sh --report          prints the recorded phases as a table and the wall time
#                                    since --reset (waits for background work included)
#   tools/phase.sh --reset           forgets them and starts the wall clock
set -uo pipefail
log=build/phase-times.txt
mkdir -p build
case "${1:-}" in
  --reset) rm -f "$log"; date +%s.%N > "$log.start"; exit 0 ;;
  --report)
    [ -f "$log" ] || exit 0
    echo "== time per phase =="
    # A phase named background-* ran beside the others: shown, not added to the phases' sum.
    # The wall time since --reset also counts the wait for background work to end.
    start=$(cat "$log.start" 2>/dev/null || echo "")
    awk -v start="$start" -v now="$(date +%s.%N)" '{ beside = ($1 ~ /^background/)
           printf "  %-20s %8.1f s  %s%s\n", $1, $2, ($3 == 0 ? "ok" : "FAILED (" $3 ")"),
                  (beside ? " (beside pytest, not in the sum)" : "")
           if (!beside) total += $2 }
         END { printf "  %-20s %8.1f s\n", "sum of the phases", total
               if (start != "") printf "  %-20s %8.1f s\n", "total (wall)", now - start }' "$log"
    rm -f "$log" "$log.start"
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
