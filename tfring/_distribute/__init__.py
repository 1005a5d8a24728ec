"""The implementation of ``tfring.distribute`` (private): ``RingStrategy`` (strategy.py), its
extended object, replica context, variables, datasets, cluster resolver, Keras integration
and save hooks. See docs/strategy.md.
"""
