"""pytest plugin for Horovod's test/parallel/test_xla.py on a machine without a GPU: its
tests skip unless ``tf.test.is_gpu_available(cuda_only=True)``; this says yes, and TF's soft
device placement runs their ``tf.device("/gpu:N")`` blocks on the CPU (XLA:CPU), where
tfring's XLA lowerings have their handler. Nothing of the tests changes.

    HOROVOD_TEST_FILE=test_xla.py tools/run_horovod_tests.sh HOROVOD_CHECKOUT -p horovod_xla_on_cpu
"""

import tensorflow as tf

tf.config.set_soft_device_placement(True)
tf.test.is_gpu_available = lambda *args, **kwargs: True
