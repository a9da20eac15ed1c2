"""Every block's output of any zoo model, as timm's `forward_intermediates` gives them: the same
blocks the similarity probes measure (`keras_tse.analysis.similarity.block_outputs_model`), found by
their type, never by their layer names."""

import weakref

from keras_tse.analysis.similarity import block_outputs_model

_PROBES = weakref.WeakKeyDictionary()  # model -> its probe: one graph clone per model, not per call


def forward_intermediates(model, inputs, indices=None):
    """`(output, intermediates)` of `model` on `inputs`: its output and the output of each chosen
    Transformer block, in depth order (a `ScannedBlocks` gives one per block it runs).

    Args:
        model: a zoo model, or any functional model whose blocks are of a known kind (KerasHub's
            backbones and tasks included); its output comes back in its own structure.
        inputs: what the model takes.
        indices: `None` for every block, an int `n` for the last `n`, or a list of block numbers
            (negative counts from the end), timm's convention.
    """
    if model not in _PROBES:
        _PROBES[model] = block_outputs_model(model, with_output=True)
    probe = _PROBES[model]
    single = len(probe.inputs) == 1 and not isinstance(inputs, (list, tuple, dict))
    output, blocks = probe([inputs] if single else inputs, training=False)
    if indices is None:
        return output, blocks
    chosen = range(len(blocks))[-indices:] if isinstance(indices, int) else indices
    try:
        return output, [blocks[i] for i in chosen]
    except (IndexError, TypeError):
        raise ValueError(
            f"`indices` must be None, a count or numbers of the {len(blocks)} blocks. Received: indices={indices!r}"
        ) from None
