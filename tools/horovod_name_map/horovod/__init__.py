"""A name map, not a Horovod: ``horovod.tensorflow`` is ``tfring.tensorflow``, one to one.

Only for running Horovod's own test files against tfring (tools/run_horovod_tests.sh); it
is not installed with tfring. Scripts migrate with ``tfring-migrate`` instead.
"""
