import numpy as np


def randomise_weights(layer, seed=7):
    """Give every weight a random value, LayerNorm scales and biases included (not 1 / 0), so a
    test comparing outputs sees every weight; a de-escalation `tau` keeps its valid value."""
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        if w.path.endswith("tau"):
            continue
        offset = 1.0 if w.path.endswith("gamma") else 0.0
        w.assign((0.5 * rng.standard_normal(tuple(w.shape)) + offset).astype("float32"))
    return layer
