"""``is_version_greater_equal_than``, which Horovod's Keras test files import."""

from packaging import version


def is_version_greater_equal_than(ver, target):
    return version.parse(ver) >= version.parse(target)
