"""The Keras layer (private): the optimizer wrappers, model preparation, saving and
loading, collectives on Keras values, SyncBatchNormalization, and the callbacks
(``callbacks/``). Faces: ``tfring.keras``, ``tfring.keras.callbacks``; elastic Keras is in
tfring/_elastic/keras_state.py.
"""
