"""The zoo ViT's compiled train step under JAX, timed and traced: step time per variant (as built, `scan`,
`remat`), and one profiler trace of each: the kernels a step launches, the ten that take the most device
time, and the device's busy time against the step's wall time (a step far longer than its kernels is
bound by launches and the host, not by arithmetic). Written for a GPU machine; on a CPU the trace has no
device plane and the kernel table says so.

    KERAS_BACKEND=jax python3 tests/gpu_profile.py OUT.json [--depth 80] [--batch 128] [--norm deescalate]
        [--dtype mixed_bfloat16] [--variants plain,scan,remat] [--steps 10]

OUT.json is rewritten whole after each variant, so a run stopped by its time limit keeps the variants it
finished.
"""

import argparse
import collections
import glob
import json
import os
import sys
import tempfile
import time

import numpy as np

VARIANTS = {"plain": {}, "scan": {"scan": True}, "remat": {"remat": True}, "scan_remat": {"scan": True, "remat": True}}


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--depth", type=int, default=80)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--norm", default="deescalate")
    parser.add_argument("--dtype", default="mixed_bfloat16")
    parser.add_argument("--variants", default="plain,scan,remat")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args(argv)
    args.variants = args.variants.split(",")
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants {','.join(unknown)}: expected some of {', '.join(VARIANTS)}")
    return args


def kernel_table(trace_dir, steps):
    """Per-step kernel counts and device time from the newest XSpace under `trace_dir`."""
    from jax.profiler import ProfileData

    paths = sorted(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True), key=os.path.getmtime)
    data = ProfileData.from_file(paths[-1])
    events = collections.defaultdict(list)  # line name -> (kernel, ns)
    for plane in data.planes:
        if plane.name.startswith("/device:GPU"):
            for line in plane.lines:
                events[line.name] += [(event.name, event.duration_ns) for event in line.events]
    # the streams hold the kernels and copies; the other lines (XLA modules, ops) span them
    streams = [name for name in events if name.startswith("Stream")] or list(events)
    time_ns, count = collections.Counter(), collections.Counter()
    for name in streams:
        for kernel, ns in events[name]:
            time_ns[kernel] += ns
            count[kernel] += 1
    lines = {name: len(found) for name, found in events.items()}
    if not count:
        return {"device_plane": False, "device_lines": lines}
    top = [
        {"kernel": name[:120], "ms_per_step": ns / steps / 1e6, "launches_per_step": count[name] / steps}
        for name, ns in time_ns.most_common(10)
    ]
    return {
        "device_plane": True,
        "kernels_per_step": sum(count.values()) / steps,
        "distinct_kernels": len(count),
        "device_busy_ms_per_step": sum(time_ns.values()) / steps / 1e6,
        "top10": top,
        "device_lines": lines,
    }


def profile_variant(args, variant):
    import jax
    import keras

    from keras_tse import zoo
    from keras_tse.training.tasks import IMAGE_CLASSIFICATION

    keras.config.set_dtype_policy(args.dtype)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    images = rng.normal(size=(args.batch, 32, 32, 3)).astype("float32")
    labels = rng.integers(0, 10, args.batch).astype("int32")
    model = zoo.vit(depth=args.depth, norm=args.norm, **VARIANTS[variant])
    IMAGE_CLASSIFICATION.compile(model, keras.optimizers.Adam(1e-4), "auto")
    durations = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])  # waits for the step's device work
            durations.append(time.perf_counter() - self.start)

    def steps(n, callbacks=()):
        data = ((images, labels) for _ in range(n))
        model.fit(data, steps_per_epoch=n, epochs=1, verbose=0, callbacks=[Clock(), *callbacks])

    steps(3)
    compile_s = durations[0] - float(np.median(durations[1:]))
    durations.clear()
    steps(args.steps)
    step_ms = 1000 * float(np.median(durations[1:]))
    trace_dir = tempfile.mkdtemp(prefix="trace_")
    durations.clear()
    jax.profiler.start_trace(trace_dir)
    steps(args.steps)
    jax.profiler.stop_trace()
    traced_ms = 1000 * float(np.sum(durations))
    table = kernel_table(trace_dir, args.steps)
    memory = jax.devices()[0].memory_stats() or {}
    return {
        "variant": variant,
        "step_ms": step_ms,
        "compile_s": compile_s,
        "traced_ms_per_step": traced_ms / args.steps,
        "peak_memory_gb": memory.get("peak_bytes_in_use", 0) / 2**30,
        **table,
    }


def main(argv=None):
    args = parse(argv)
    import jax
    import keras

    record = {
        "device": jax.devices()[0].device_kind,
        "backend": keras.backend.backend(),
        "jax": jax.__version__,
        "keras": keras.__version__,
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "variants": [],
    }
    for variant in args.variants:
        record["variants"].append(profile_variant(args, variant))
        print(json.dumps(record["variants"][-1]), flush=True)
        with open(args.out + ".part", "w") as f:
            json.dump(record, f, indent=1)
        os.replace(args.out + ".part", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
