"""`keras-tse presets`: the preset table, and the parameter counts behind its numbers.

The counts come from building each preset (`count_sizes`), written once to
`keras_tse/zoo/preset_sizes.json` (`keras-tse presets --count --write ...`) so that listing is instant;
tests/test_presets.py rebuilds the presets and checks every count against `count_params()`.
"""

import math

import keras

from keras_tse import run_files, zoo


def model_sizes(model):
    """{"params": trainable, "state": non-trainable} scalars of a built model (the two add to count_params)."""
    trainable = sum(math.prod(w.shape) for w in model.trainable_weights)
    return {"params": int(trainable), "state": int(model.count_params() - trainable)}


def count_sizes(progress=False):
    """Build every preset (untrained) and count its parameters; one progress step per preset."""
    names = sorted(zoo.presets())
    bar = keras.utils.Progbar(len(names), unit_name="preset") if progress else None
    sizes = {}
    for i, name in enumerate(names):
        model = zoo.from_preset(name, load_weights=False)  # the architecture's count, weights shipped or not
        sizes[name] = model_sizes(model)
        del model
        keras.backend.clear_session(free_memory=True)
        if bar:
            bar.update(i + 1, values=None)
    return sizes


def write_sizes(sizes, path):
    run_files.write_json(path, dict(sorted(sizes.items())), indent=1)


def format_presets(sizes=None):
    """A Markdown table: name, parameters (and state), input, weights, card path."""
    rows = ["| preset | parameters | state | input | weights | card |", "|---|---|---|---|---|---|"]
    for name, entry in sorted(zoo.presets().items()):
        size = (sizes or {}).get(name) or {"params": entry["params"], "state": entry["state"]}
        params = "not counted" if size["params"] is None else f"{size['params']:,}"
        state = "" if not size.get("state") else f"{size['state']:,}"
        rows.append(f"| {name} | {params} | {state} | {entry['input']} | {entry['weights']} | {entry['card']} |")
    return "\n".join(rows)
