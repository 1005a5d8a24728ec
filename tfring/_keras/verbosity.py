"""Progress output on rank 0 only."""

from tfring._basics import basics


def verbose(level=1, root_rank=0):
    """Returns ``level`` on ``root_rank`` and 0 elsewhere, for Keras' ``verbose=`` arguments.

    Example:
      ``model.fit(x, y, epochs=epochs, verbose=hvd.verbose())``  # progress bar on rank 0
      ``model.fit(x, y, verbose=hvd.verbose(2))``                # one line per epoch

    Raises:
      tfring.errors.PreconditionError: tfring is not initialized.
    """
    return level if basics.rank() == root_rank else 0
