"""The keywords of `scale.configure` from a run's settings by name (the command line's flags, or a
`training.Plan`'s settings), Keras-free: `--help` and a bad flag answer before Keras loads."""

import json

# Settings that may differ between the processes of one run: where each reads and writes, how it talks.
PER_PROCESS = ("out", "data_dir", "tfds_dir", "compile_cache", "verbose", "process_id", "coordinator", "join_timeout")


def settings_of(values):
    """`scale.configure`'s keywords from `values` ({setting: value}): precision, compilation, the data and
    model parallelism, the compile cache and the processes (`processes_of`)."""
    return dict(
        mixed_precision=values.get("mixed_precision"),
        jit_compile=values.get("jit_compile", False),
        data_parallel=values.get("data_parallel", False),
        compile_cache_dir=values.get("compile_cache"),
        processes=processes_of(values),
        model_parallel=values.get("model_parallel", 1),
    )


def processes_of(values):
    """None (one process), "auto" (`--distributed auto`) or the coordinator, count and index given, with
    the settings every process must share (every one but `PER_PROCESS`) and the join's timeout."""
    if values.get("distributed") == "auto":
        return "auto"
    if values.get("coordinator") is None:
        return None
    shared = {key: value for key, value in values.items() if key not in PER_PROCESS}
    return dict(
        coordinator=values["coordinator"],
        num_processes=values["num_processes"],
        process_id=values["process_id"],
        settings=json.loads(json.dumps(shared, default=str)),  # as sent: tuples become lists
        join_timeout=values["join_timeout"],
    )
