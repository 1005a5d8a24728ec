"""The compute job of the tf.data service (``horovod.tensorflow.data.compute_worker``):

    tfringrun -np 2 python -m tfring.tensorflow.data.compute_worker /shared/compute.json \\
        [--dispatchers 1] [--dispatcher-side compute|training] [--timeout 60]

A face and entry point: the implementation is tfring/_engines/data_service/compute_worker.py.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.tensorflow.data.compute_worker in tfring/_api/exports.py

if __name__ == "__main__":
    from tfring._engines.data_service.compute_worker import command_line

    command_line()
