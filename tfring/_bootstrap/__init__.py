"""What the core, TensorFlow and Keras layers need from the launcher and elastic world,
below them all, so that imports run one way (tests/test_python_layers.py).

  launch_env  the environment a launcher hands a worker: the store's address and the job
              secret, the elastic worker id; store addresses and fresh secrets
  network     this machine's addresses (interfaces, routes): where a store can listen
  providers   the few functions of higher layers that a lower one calls at run time (an
              elastic worker's init joins through the driver; TF1's DistributedOptimizer
              hands a Keras optimizer to tfring.keras), named in one table, imported on use

Imports nothing of tfring above ``_core`` and ``errors``; no TensorFlow.
"""
