"""The one helper of ``horovod.tensorflow.util`` Horovod's tests import."""

import tensorflow as tf


def _executing_eagerly():
    return tf.executing_eagerly()
