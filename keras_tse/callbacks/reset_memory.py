import keras


# Not registered for serialization: it has no settings, and TransformerXL adds it by itself.
class ResetMemory(keras.callbacks.Callback):
    """Empties the memory of every Transformer-XL block at each epoch start and before evaluating.

    Transformer-XL's memory carries the hidden states of the previous segment
    of an ordered stream into the next one. A new pass over the training text
    starts a new stream, and evaluation reads another text: both must start
    from an empty memory, or the first segment would attend to states of a
    text it does not follow. `keras_tse.zoo.TransformerXL` adds this callback
    to `fit`, `evaluate` and `predict` itself; add it by hand only to other
    models built from `TransformerXLBlock`s.
    """

    def on_epoch_begin(self, epoch, logs=None):
        reset_memory(self.model)

    def on_test_begin(self, logs=None):
        reset_memory(self.model)

    def on_predict_begin(self, logs=None):
        reset_memory(self.model)


def reset_memory(model):
    """Empty the memory of every layer of `model` that has one; returns how many layers were reset."""
    count = 0
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            count += reset_memory(layer)
        elif hasattr(layer, "reset_memory"):
            layer.reset_memory()
            count += 1
    return count


def reorder_memory(model, rows):
    """Make each sequence's memory in every layer of `model` that has one what sequence `rows[i]`'s was (beam
    search continues some beams twice and drops others)."""
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            reorder_memory(layer, rows)
        elif hasattr(layer, "reorder_memory"):
            layer.reorder_memory(rows)
