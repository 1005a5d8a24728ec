#!/usr/bin/env bash
# The system packages tfring needs on Debian/Ubuntu, installed when missing. Used by the
# Makefile (`make install`, `make test`) and by .ci/run, so a fresh machine needs nothing
# typed beyond the README's two commands.
#
#   tools/system_deps.sh build   g++, make, OpenSSL headers (libtfring_core links libcrypto
#                                for the job secret's HMAC)
#   tools/system_deps.sh test    the above, GoogleTest (C++ unit tests), OpenSSH server and
#                                client, iproute2 (multi-host launcher tests: a private sshd
#                                on 127.0.0.1, network namespaces), Java 17 (tfring.spark's
#                                tests run a local Spark cluster)
#
# Everything else (TensorFlow, Open MPI, mpi4py, pytest, ...) comes from PyPI into .venv
# (requirements.txt). Installs with apt-get as root, or through `sudo -n`; otherwise prints
# each missing package and the one command that installs them, and exits 1 before anything
# is compiled. Where dpkg does not exist (not Debian), it says so and checks nothing.
set -euo pipefail

purpose=${1:-build}
case "$purpose" in
  build) wanted=(g++ make libssl-dev) ;;
  test) wanted=(g++ make libssl-dev libgtest-dev openssh-server openssh-client iproute2 openjdk-17-jre-headless) ;;
  *) echo "usage: $0 build|test" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "system_deps: no dpkg here (not Debian/Ubuntu): not checking ${wanted[*]}; install their" \
       "equivalents yourself if the build fails" >&2
  exit 0
fi

missing=()
for p in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  run=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  run=(sudo -n)
else
  echo "system_deps: missing system package(s) for '$purpose': ${missing[*]}" >&2
  echo "system_deps: install them with:  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "system_deps: installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
# The package lists of a fresh machine may be empty or stale: update, then install.
"${run[@]}" apt-get update -q >/dev/null
"${run[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "system_deps: installed ${missing[*]}"
