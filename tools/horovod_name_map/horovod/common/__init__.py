"""``horovod.common``: only what Horovod's test files import."""
