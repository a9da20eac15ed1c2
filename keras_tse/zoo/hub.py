"""Presets on the Hugging Face Hub: `hf://owner/name` names a model repository that holds a folder
`save_preset` wrote (KerasHub's layout: `config.json`, `model.weights.h5`, `metadata.json`; upload the
folder as it is). `huggingface_hub` (the `hub` extra) fetches it into Hugging Face's own cache, where
`HF_HUB_OFFLINE=1` finds it again with no network, as KerasHub's `hf://` presets are found."""

SCHEME = "hf://"


def is_hub_handle(preset):
    """Whether `preset` names a Hugging Face repository (`hf://owner/name`)."""
    return isinstance(preset, str) and preset.startswith(SCHEME)


def download(handle):
    """The local folder (Hugging Face's cache) that holds repository `handle`'s files, fetched if needed."""
    repository = handle[len(SCHEME) :]
    parts = repository.split("/")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"A Hugging Face preset is hf://owner/name. Received: preset={handle!r}")
    try:
        import huggingface_hub
    except ImportError:
        raise ImportError(f"Loading {handle} needs the huggingface_hub package: pip install 'keras-tse[hub]'") from None
    try:
        return huggingface_hub.snapshot_download(repo_id=repository)
    except (OSError, ValueError, huggingface_hub.errors.HfHubHTTPError) as error:  # offline and not cached, unknown
        first = " ".join(str(error).split())[:200]
        raise ValueError(f"{handle}: received no preset from the Hugging Face Hub ({first})") from None
