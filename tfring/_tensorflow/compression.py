"""Gradient compression during allreduce (Horovod's ``hvd.Compression``).

A compressor turns a tensor into what travels (``compress -> (tensor, ctx)``) and back
(``decompress(tensor, ctx)``). ``Compression.fp16`` halves the bytes of float32/float64
tensors; other dtypes pass through unchanged.
"""

import tensorflow as tf


class Compressor:
    """Interface of a compressor (static methods, no state)."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors unchanged."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 and casts the result back."""

    @staticmethod
    def compress(tensor):
        tensor = tf.convert_to_tensor(tensor)
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tf.cast(tensor, ctx)


class Compression:
    """``Compression.none`` (default) and ``Compression.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
