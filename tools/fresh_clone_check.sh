#!/usr/bin/env bash
# What a newcomer gets: clones HEAD (committed work only) into a temporary folder and runs
# the README's two commands there, `make run` then `make test`, with a clean environment
# (no venv, no TFRING_* or PYTHONPATH from this shell). Run it before committing a change to
# the install, the Makefile or the README.
#   tools/fresh_clone_check.sh [--keep] [--only-run]
# --keep leaves the clone (its path is printed); --only-run skips `make test`.
# Exit status: that of the first command that failed. Logs: <clone>/fresh-*.log.
set -uo pipefail
keep=0; only_run=0
for a in "$@"; do
  case "$a" in
    --keep) keep=1 ;;
    --only-run) only_run=1 ;;
    *) echo "usage: $0 [--keep] [--only-run]" >&2; exit 2 ;;
  esac
done
top=$(git rev-parse --show-toplevel) || exit 2
tmp=$(mktemp -d -t tfring-fresh-XXXXXX)
[ $keep -eq 1 ] || trap 'rm -rf "$tmp"' EXIT
git clone -q "$top" "$tmp/tfring" || exit 1
cd "$tmp/tfring" || exit 1
echo "fresh clone of $(git rev-parse --short HEAD) in $tmp/tfring"
# The machine's package-index settings (PIP_*, proxies) are kept: they are not the project's.
clean_env=(env -i "HOME=$tmp" "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" "LANG=C.UTF-8"
           "TMPDIR=${TMPDIR:-/tmp}")
while IFS= read -r var; do clean_env+=("$var"); done < <(env | grep -E '^(PIP_[A-Z_]*|[a-zA-Z_]*_proxy|[A-Z_]*_PROXY)=' || true)
commands=("make run")
[ $only_run -eq 1 ] || commands+=("make test")
for cmd in "${commands[@]}"; do
  log="fresh-${cmd// /-}.log"
  start=$(date +%s)
  "${clean_env[@]}" $cmd > "$log" 2>&1
  status=$?
  echo "$cmd: exit $status after $(( $(date +%s) - start )) s (log: $tmp/tfring/$log)"
  if [ $status -ne 0 ]; then
    tail -40 "$log"
    [ $keep -eq 1 ] || { trap - EXIT; echo "clone kept for inspection: $tmp/tfring"; }
    exit $status
  fi
done
echo "fresh clone check: OK"
