"""The ``tfringrun`` launcher's implementation (private; faces: ``tfring.runner`` and the
``tfringrun`` / ``python -m tfring.runner.launch`` entry). The launcher layer, above
``tfring/_distribute`` and below ``tfring/_elastic`` (tests/test_python_layers.py).

Modules, one concept each:
  args        the command line, and the same options from Python (options: tfring.run)
  settings    flags that set the core's TFRING_* settings; validation by the core
  hosts       -H / --hostfile parsing and the slot plan (rank, local and cross ranks)
  jobenv      each worker's environment (identity, store address, secret)
  placement   which spawner each host gets, where the store listens (--network-interface)
  spawn       starting a worker process on this machine
  remote      starting a worker on another host (ssh or --remote-command)
  remote_boot the remote end: reads command, env and secret from stdin, relays signals
  network     interface and route addresses
  output      copying worker output with rank prefixes (and to log files)
  signals     turning signals to the launcher into events
  blame       which failed rank caused the others to fail
  supervisor  running the workers to the end: failure policy and exit code
  launch      main(): wires the above together
  rendezvous  the public API for other launchers: Store, rank_identities
  binding     which CPUs each local rank runs on (--bind-to)
  stopped     is a worker stopped (frozen) by a signal
  store_hook  the launch's store (serving) and a Python caller's hook into it (tfring.run)
  supervision_loop  the one loop both launchers run: signals, exits, ticks
  python_launch    tfring.run(fn, np=N): a tfringrun job from Python and notebooks
  function_job     fn to the ranks and results back through the store (tfring.run, tfring.spark)
  function_worker  one rank of such a job: python -m tfring._runner.function_worker
"""
