"""A training run that stops at the first batch end after a Ctrl-C (`keras_tse.interrupts`)."""

import keras

from keras_tse import interrupts


class StopOnInterrupt(keras.callbacks.Callback):
    """Raise `KeyboardInterrupt` at the first batch end after a Ctrl-C: a place where every file the run
    saved is whole, so the same command resumes from its last saved epoch."""

    def on_train_begin(self, logs=None):
        interrupts.training(True)

    def on_train_end(self, logs=None):
        interrupts.training(False)

    def on_train_batch_end(self, batch, logs=None):
        if interrupts.requested():
            raise KeyboardInterrupt

    on_test_batch_end = on_train_batch_end
    on_predict_batch_end = on_train_batch_end
