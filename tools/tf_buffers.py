"""Where a CPU TensorFlow tensor's bytes live, for the probes and work counts that watch which
buffers an op reads and writes (``.numpy()`` copies, so its address says nothing).

DLPack shares the tensor's buffer; a DLManagedTensor starts with its DLTensor, whose first
field is the data pointer.
"""

import ctypes


def tensor_address(tf, tensor):
    """The address of ``tensor``'s own buffer (a CPU tensor; ``tf`` the tensorflow module)."""
    capsule = tf.experimental.dlpack.to_dlpack(tensor)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.c_void_p.from_address(get(capsule, b"dltensor")).value
