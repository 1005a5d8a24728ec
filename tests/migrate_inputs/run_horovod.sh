#!/bin/sh
# Launch line in the style of Horovod's docs.
export HOROVOD_FUSION_THRESHOLD=33554432
export HOROVOD_CYCLE_TIME=2
horovodrun -np 2 --gloo --log-level WARNING python horovod_tf2_keras.py "$@"
