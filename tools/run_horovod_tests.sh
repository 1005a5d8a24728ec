#!/bin/sh
# Runs Horovod's own test/parallel/test_tensorflow.py (or the file HOROVOD_TEST_FILE names,
# e.g. test_tensorflow_process_sets.py) against tfring at np=2 on CPU, through
# a plain name map (tools/horovod_name_map: horovod.tensorflow = tfring.tensorflow,
# horovod.tensorflow.keras = horovod.keras = tfring.keras), in a scratch folder. Horovod's
# files are read from a checkout you give; nothing is copied into the project. Needs `mock`
# and `cloudpickle` (Horovod's test utilities import them), `parameterized` for
# test_tensorflow2_keras.py; a PYTHONPATH you set is kept (after the map).
#
#   tools/run_horovod_tests.sh /path/to/horovod [pytest args...]
#   HOROVOD_TEST_FILE=test_tensorflow_process_sets.py tools/run_horovod_tests.sh /path/to/horovod
#   HOROVOD_TEST_FILE=test_tensorflow2_keras_process_sets.py tools/run_horovod_tests.sh /path/to/horovod
#   HOROVOD_TEST_FILE=test_xla.py tools/run_horovod_tests.sh /path/to/horovod -p horovod_xla_on_cpu
#
# docs/tensorflow.md and docs/keras.md ("Coming from Horovod") record the results and why
# each failure fails.
set -eu
horovod=$1
shift
test_file=${HOROVOD_TEST_FILE:-test_tensorflow.py}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp "$horovod/test/parallel/$test_file" "$horovod/test/parallel/base_test_tensorflow.py" \
   "$horovod/test/utils/common.py" "$scratch/"
cd "$scratch"
PYTHONPATH="$repo/tools/horovod_name_map:$scratch:$repo${PYTHONPATH:+:$PYTHONPATH}" TF_CPP_MIN_LOG_LEVEL=2 OMP_NUM_THREADS=1 \
  "$python" -m tfring.runner.launch -np 2 --output-filename "$scratch/logs" \
  "$python" -m pytest -q -p no:cacheprovider --timeout 60 -rA "$test_file" "$@" >/dev/null 2>&1 || true
grep -E "^(SUBFAILED|FAILED)" "$scratch/logs/rank.0.log" | sort -u
tail -1 "$scratch/logs/rank.0.log"
