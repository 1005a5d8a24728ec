"""The TensorFlow layer (private): collectives as TF ops, their gradients, gradient tapes,
TF1's optimizer and hooks, compression, XLA, ``tf.summary`` metrics, and the tf.data
service's training side (``data/``). Faces: ``tfring.tensorflow`` (with its ``summary``,
``compression`` and ``xla`` modules) and ``tfring.tensorflow.data``.
"""
