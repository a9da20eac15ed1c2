"""The commands' edge: flags, the backend and every expected failure, checked before data or models.

Every expected failure (a bad flag, a bad combination of flags, an unreadable or ill-formed input
file, a folder holding someone else's files) ends as one line on stderr,

    <prog>: error: <flag or file>: received <value>; expected <what>

and exit status 2, before any data is read or any model built; a traceback means a bug. Each `type=`
below rejects a bad value that way, `Parser` reports argparse's own errors on one line too (no usage
block), and `exit_code_of` turns an `InputError` (or the other expected errors) raised later into
the same line. `--epochs 0` is an error, not "use the default". `--help` shows every default.
"""

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import re
import signal
import sys
import threading
import zipfile

from keras_tse import interrupts, layouts, peers, run_lock
from keras_tse._checks import STOPPED_STATUS, InputError, TrainingStopped
from keras_tse.norms import INITIALIZERS, PAPER_NORMS
from keras_tse.training.configs import options_of

# The backends keras_tse trains on; Keras' numpy and openvino backends run inference only.
BACKENDS = ("tensorflow", "jax", "torch")
BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}
# Deeper than any Transformer trained in the literature by an order of magnitude; a typo such as
# --depth 100000 would otherwise spend minutes building layers before any error could show.
MAX_DEPTH = 1000


class HelpFormatter(argparse.HelpFormatter):
    """Every option's default in `--help`, unless its text says it already or it has none to show."""

    def _get_help_string(self, action):
        text = action.help or ""
        nothing = action.default is None or action.default == argparse.SUPPRESS  # (0 is a default to show)
        if "default" in text or nothing or not action.option_strings or isinstance(action.default, bool):
            return text
        value = ",".join(map(str, action.default)) if isinstance(action.default, tuple) else action.default
        return f"{text} (default: {value})"


class Parser(argparse.ArgumentParser):
    """argparse, with an error reported on one line: `<prog>: error: <what>` and exit status 2."""

    # set by add_run_arguments: --out's default, a format of the flags (RUN_FOLDER), with "_smoke" added
    # under --smoke
    run_folder = None

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        print(f"{self.prog}: error: {_in_our_words(message)}", file=sys.stderr)
        sys.exit(2)

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(_negative_values_attached(sys.argv[1:] if args is None else args), namespace)
        if self.run_folder is not None and parsed.out is None:
            from keras_tse.training.plans import run_folder_of  # Keras-free

            parsed.out = run_folder_of(vars(parsed))
        if self.run_folder is not None and parsed.verbose is None:
            parsed.verbose = 1 if sys.stdout.isatty() else 2  # a progress bar on a terminal, a line per epoch in a file
        if self.run_folder is not None and os.path.exists(parsed.out) and not os.path.isdir(parsed.out):
            self.error(f"--out: received {parsed.out}, a file; expected a folder (it holds one run folder per variant)")
        try:
            check_scale(parsed)
        except InputError as error:
            self.error(str(error))
        return parsed

    def add_subparsers(self, **kwargs):
        kwargs.setdefault("parser_class", Parser)
        return super().add_subparsers(**kwargs)


def _negative_values_attached(argv):
    """`--flag -1e-3` as `--flag=-1e-3`: argparse takes a value that starts with "-" for another flag unless it
    reads as a plain number (-1, -.5), so a negative value in exponent notation would be "received nothing"
    instead of its own range's refusal."""
    joined = []
    for token in map(str, argv):
        if joined and joined[-1].startswith("-") and "=" not in joined[-1] and _is_negative_number(token):
            joined[-1] = f"{joined[-1]}={token}"
        else:
            joined.append(token)
    return joined


def _is_negative_number(token):
    """Whether `token` is a number written with a minus sign (-1e-3, -inf)."""
    try:
        float(token)
    except ValueError:
        return False
    return token.startswith("-")


# argparse's own errors, said as every other refusal is: `<flag>: received <value>; expected <what>`
_ARGPARSE_ERRORS = (
    (
        re.compile(r"^argument (.+?): invalid choice: (.+) \(choose from (.+)\)$"),
        r"\1: received \2; expected one of \3",
    ),
    (re.compile(r"^unrecognized arguments: (.+)$"), r"arguments: received \1; expected the flags --help lists"),
    (re.compile(r"^the following arguments are required: (.+)$"), r"\1: received nothing; expected a value"),
    (re.compile(r"^argument (.+?): expected one argument$"), r"\1: received nothing; expected a value"),
    (re.compile(r"^argument (.+)$"), r"\1"),
)


def _in_our_words(message):
    for pattern, words in _ARGPARSE_ERRORS:
        if pattern.match(message):
            return pattern.sub(words, message)
    return message


def _refuse(text, expected):
    return argparse.ArgumentTypeError(f"received {text!r}; expected {expected}")


def _checked(kind, expected, accept):
    """A `type=` that parses `kind` and keeps the values `accept` takes; anything else is refused in one
    line naming `expected` (NaN and infinity fail every bound below)."""

    def parse(text):
        value = _number(text, kind, expected)
        if not accept(value):
            raise _refuse(text, expected)
        return value

    parse.__name__ = expected
    return parse


_INF = float("inf")
positive_int = _checked(int, "a positive integer", lambda v: v >= 1)
non_negative_int = _checked(int, "an integer >= 0", lambda v: v >= 0)
depth = _checked(int, f"a positive integer up to {MAX_DEPTH}", lambda v: 1 <= v <= MAX_DEPTH)  # a number of blocks
positive_float = _checked(float, "a positive number", lambda v: 0 < v < _INF)
non_negative_float = _checked(float, "a number >= 0", lambda v: 0 <= v < _INF)
unit_interval = _checked(float, "a number in [0, 1]", lambda v: 0 <= v <= 1)
dropout_rate = _checked(float, "a number in [0, 1)", lambda v: 0 <= v < 1)
probability_mass = _checked(float, "a number in (0, 1]", lambda v: 0 < v <= 1)  # top-p: an empty nucleus draws nothing


def tau(text):
    """`--tau`: eq. (21)'s strength, checked where every tau is (`layouts.eq21_options`)."""
    value = _number(text, float, "a number")
    try:
        return layouts.eq21_options(tau=value)["tau"]
    except ValueError as error:
        raise _refuse(text, _expected(error)) from None


def comma_list(kind, distinct=False):
    """A `type=` for comma-separated values, each checked by `kind` (one of the above, or `str`);
    `distinct` refuses a value given twice (two runs of one seed would share a folder)."""

    def parse(text):
        values = tuple(kind(v.strip()) for v in text.split(",") if v.strip())
        if not values:
            raise _refuse(text, "a comma-separated list")
        if distinct and len(set(values)) < len(values):
            raise _refuse(text, "distinct values, comma-separated")
        return values

    parse.__name__ = f"comma-separated {getattr(kind, '__name__', 'value')}"
    return parse


def choice_list(choices, groups):
    """A `type=` for one or more comma-separated names out of `choices`, in the order given; a name in
    `groups` (e.g. "all") stands for its tuple of names."""

    def parse(text):
        names = []
        for name in (n.strip() for n in text.split(",") if n.strip()):
            if name not in (*choices, *groups):
                raise _refuse(name, f"one or more of {', '.join([*choices, *groups])}, comma-separated")
            names.extend(n for n in groups.get(name, (name,)) if n not in names)
        if not names:
            raise _refuse(text, f"at least one of {', '.join(choices)}")
        return tuple(names)

    parse.__name__ = "comma-separated names"
    return parse


def _number(text, kind, what):
    try:
        return kind(text)
    except (TypeError, ValueError):
        raise _refuse(text, what) from None


# What a command may fail with that is the input's fault, not a bug: bad settings (InputError is a
# ValueError), an unreadable or missing file, a damaged archive, a run folder of other settings.
EXPECTED_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile)


def exit_code_of(prog, function, errors=EXPECTED_ERRORS):
    """Run `function()`; an error of the types `errors` ends as one line `<prog>: error: <what>` on
    stderr, no traceback, exit status 2 (a training stopped on a non-finite loss: 3)."""
    try:
        result = function()
    except TrainingStopped as error:  # not the input's fault, not a crash: its own status
        print(f"{prog}: error: {error}", file=sys.stderr)
        return STOPPED_STATUS
    except errors as error:
        peers.settle()  # a collective that lost its peer: the peer's end is the line to print
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2
    return result if isinstance(result, int) else 0


def interrupted(prog, resumes=True):
    """Ctrl-C, as one line and exit status 130 (the shell's for SIGINT): every file a command saves is
    written whole (`run_files`), so what it had saved stays; a command that `resumes` (its module's `RESUMES`)
    goes on from there when run again, which the line says."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None  # a second Ctrl-C: not mid-line
    again = ", and the same command resumes" if resumes else ""
    print(f"{prog}: interrupted; every file it had saved is whole{again}", file=sys.stderr)
    if main:
        signal.signal(signal.SIGINT, previous)
    return 130


def edge(prog, run, choose=True, trains=True, resumes=True):
    """A command's whole edge, the one every command runs behind, once: the backend chosen
    (`choose_backend`, unless the command chooses it itself), then `run()`, every expected failure one line
    and exit status 2 (`exit_code_of`), Ctrl-C one line and 130; at the end the run's other processes told
    (if any) and every folder the command held released."""
    code = exit_code_of(prog, lambda: choose_backend(prog, trains=trains)) if choose else 0
    if code:
        return code
    previous = interrupts.catch()
    try:
        code = exit_code_of(prog, run)
        if code == 0:
            peers.finished()  # the run's other processes, if any, may see this one end
        return code
    except KeyboardInterrupt:
        return interrupted(prog, resumes)
    except Exception:
        peers.settle()  # as in exit_code_of: the peer's end, not this process's traceback
        raise
    finally:
        interrupts.release(previous)
        run_lock.release_all()  # the folders this command wrote are free for the next


def plan_of(task, args):
    """The plan of a run of `task`'s kind whose settings the flags `args` are, by name (`training.Plan`): the
    plan Python builds with `Plan.build(task, **settings)`, planned and checked once."""
    from keras_tse.training import plans  # Keras, once the backend is chosen

    kind = plans.run_kind(task)
    return plans.plan_of(kind, plans.Settings(kind.defaults, **vars(args)))


def train_plan(task, args):
    """`keras-tse train`'s one path: the flags' plan (`plan_of`), trained by the one trainer."""
    from keras_tse.training import trainer

    return trainer.train(plan_of(task, args))


def main_of(prog, run, parse_args, argv=None, trains=True):
    """A task's own entry (a recipe script run as `python recipes/...`): the backend chosen, the flags
    parsed and checked, then `run(args)`, behind the one `edge`."""
    return edge(prog, lambda: run(parse_args(argv)), trains=trains)


def config_from(cls, args):
    """A command's settings: the dataclass `cls` (or its `quick()` preset under --quick) with every
    field the user gave a flag for; a flag's destination is the field's name, None is "not given"."""
    given = {f.name: getattr(args, f.name, None) for f in dataclasses.fields(cls)}
    given = {name: value for name, value in given.items() if value is not None}
    return cls.quick(**given) if getattr(args, "quick", False) else cls(**given)


def reads_as(test):
    """`looks_ours` for `run_files.claim_file`: whether a file's text passes `test` (a file this
    command wrote, which it may replace); unreadable or unparsable text does not."""

    def looks_ours(path):
        try:
            with open(path) as f:
                return test(f.read())
        except (OSError, UnicodeDecodeError, ValueError):
            return False

    return looks_ours


def current_backend():
    """The backend Keras will take (read before Keras is imported): KERAS_BACKEND, keras.json, tensorflow."""
    return os.environ.get("KERAS_BACKEND") or _configured_backend() or "tensorflow"


def check_scale(args):
    """The scale flags against the backend, and --compile-cache against the file system."""
    backend = current_backend()
    if getattr(args, "data_parallel", False) and backend not in ("jax", "tensorflow"):
        raise InputError(
            "--data-parallel",
            f"KERAS_BACKEND={backend}",
            "KERAS_BACKEND=jax or tensorflow (Keras's fit does not train over several PyTorch devices yet)",
        )
    check_processes(args, backend)
    cache = getattr(args, "compile_cache", None)
    if cache not in (None, "off") and os.path.exists(cache) and not os.path.isdir(cache):
        raise InputError("--compile-cache", f"{cache}, a file", "a folder, or 'off'")


def check_processes(args, backend):
    """The multi-process flags: all three of coordinator, count and index or none (or `--distributed
    auto` alone), a HOST:PORT, an index below the count, and the JAX backend."""
    given = {f: getattr(args, a, None) for f, a in PROCESS_FLAGS}
    named = [f for f, v in given.items() if v is not None]
    if getattr(args, "distributed", None) is not None and named:
        raise InputError("--distributed auto", f"also {', '.join(named)}", "one or the other")
    if named and len(named) < len(PROCESS_FLAGS):
        missing = [f for f in given if f not in named]
        raise InputError(", ".join(named), f"without {', '.join(missing)}", "all three of " + ", ".join(given))
    if named:
        host, _, port = args.coordinator.rpartition(":")
        if not host or not port.isdigit():
            raise InputError("--coordinator", repr(args.coordinator), "HOST:PORT, e.g. 127.0.0.1:29500")
        if args.process_id >= args.num_processes:
            raise InputError("--process-id", args.process_id, f"0 to {args.num_processes - 1} (--num-processes)")
    first = named[0] if named else "--distributed" if getattr(args, "distributed", None) else None
    if getattr(args, "model_parallel", 1) > 1:
        if first:
            raise InputError("--model-parallel", args.model_parallel, f"1 with {first} (one process a model, for now)")
        first = "--model-parallel"
    if first and backend != "jax":
        raise InputError(first, f"KERAS_BACKEND={backend}", "KERAS_BACKEND=jax (keras.distribution is JAX-only)")


PROCESS_FLAGS = (("--coordinator", "coordinator"), ("--num-processes", "num_processes"), ("--process-id", "process_id"))


def installed(module):
    """Whether `module` can be imported, without importing it (an entry of None in sys.modules, as
    tests use to hide a package, counts as not installed)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _configured_backend():
    """The backend in Keras' own config file ($KERAS_HOME/keras.json, else ~/.keras/keras.json), if any."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json")) as f:
            return json.load(f).get("backend")
    except (OSError, ValueError, AttributeError):
        return None


def choose_backend(prog, trains=True):
    """Check or choose the Keras backend before Keras is imported (Keras reads it once, at import).

    KERAS_BACKEND naming an unknown, untrainable or missing backend is an InputError, and so is an
    unknown one in keras.json. With neither set, or keras.json naming a backend that is not installed
    (Keras writes "tensorflow" there on its first import), this picks TensorFlow if installed, else
    JAX, else PyTorch, and says so on stderr. `trains=False` (`keras-tse info`) accepts any backend
    Keras knows, numpy and openvino too.
    """
    if "keras" in sys.modules:  # already imported (a test, a notebook): its backend is settled
        return sys.modules["keras"].backend.backend() if hasattr(sys.modules["keras"], "backend") else None
    supported = BACKENDS if trains else (*BACKENDS, "numpy", "openvino")
    name, where = os.environ.get("KERAS_BACKEND"), "KERAS_BACKEND"
    if not name:
        name, where = _configured_backend(), "keras.json's backend"
    if name is not None and name not in supported:
        raise InputError(where, repr(name), f"one of {', '.join(supported)}")
    if name is not None and installed(BACKEND_MODULES.get(name, name)):
        return name
    if where == "KERAS_BACKEND":
        raise InputError(where, repr(name), f"an installed backend; {name} is not installed here")
    found = next((b for b in BACKENDS if installed(BACKEND_MODULES[b])), None)
    if found is None:
        raise InputError(
            "KERAS_BACKEND", "nothing (unset)", "an installed backend: pip install 'keras_tse[jax]' (or torch)"
        )
    if found != "tensorflow" or name is not None:
        why = f"keras.json's {name} is not installed" if name else "TensorFlow is not installed"
        why = f"KERAS_BACKEND is not set and {why}"
        print(f"{prog}: {why}; using {found}", file=sys.stderr)
    os.environ["KERAS_BACKEND"] = found
    return found


def add_compile_cache(parser, default=None):
    """`--compile-cache DIR|off`, read by `keras_tse.training.compile_cache.use_compile_cache`; its
    default None there is $KERAS_TSE_COMPILE_CACHE, else ~/.cache/keras_tse/compile."""
    where = "$KERAS_TSE_COMPILE_CACHE, else ~/.cache/keras_tse/compile" if default is None else default
    parser.add_argument(
        "--compile-cache",
        default=default,
        metavar="DIR",
        help=f"persistent cache of compiled programs (JAX, torch.compile); 'off' compiles anew (default: {where})",
    )


def scale_settings(args):
    """The keywords of `keras_tse.training.scale.configure` from the flags `add_scale_arguments` and
    `add_compile_cache` add (`scale.settings_of`: the library takes values, never an argparse namespace)."""
    from keras_tse.training.scale_settings import settings_of  # Keras-free

    return settings_of(vars(args))


JIT_COMPILE_MODES = {"blocks": True, "whole_model": "whole_model"}  # `training.block_compile`'s values


def jit_compile_mode(text):
    """`--jit-compile`'s optional value: blocks (True: on PyTorch each block compiled) or whole_model."""
    if text not in JIT_COMPILE_MODES:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(JIT_COMPILE_MODES)}; received {text!r}")
    return JIT_COMPILE_MODES[text]


def add_jit_compile(parser, default):
    parser.add_argument(
        "--jit-compile",
        nargs="?",
        const=True,
        default=default,
        type=jit_compile_mode,
        metavar="{blocks,whole_model}",
        help="compile(jit_compile=True): XLA on JAX and TF; on PyTorch torch.compile of each block (blocks, the "
        "default) or of the whole train step (whole_model, Keras's own). Without it: XLA on JAX (TF: on a GPU), "
        "eager PyTorch",
    )


def add_scale_arguments(parser):
    """The flags `keras_tse.training.scale.configure` reads: precision, compilation, data parallelism."""
    parser.add_argument(
        "--mixed-precision",
        nargs="?",
        const="bfloat16",
        choices=("bfloat16", "float16"),
        default=None,
        help="16-bit compute, float32 variables: bfloat16 (the flag alone; Ampere or newer GPUs, TPUs) or "
        "float16 (with loss scaling; V100s, T4s and other GPUs without bfloat16)",
    )
    add_jit_compile(parser, default=False)
    parser.add_argument(
        "--data-parallel",
        action="store_true",
        help="JAX only: keras.distribution.DataParallel over every visible device",
    )


def add_distribution_arguments(parser, model_parallel=True):
    """The flags of a run over several processes (`keras_tse.training.scale.join_processes`) or with its
    weights split over devices (`scale.use_model_parallel`), JAX only. Both recipes take the process
    flags; `--model-parallel` only where `model_parallel` (the language model has no tested layout)."""
    if model_parallel:
        parser.add_argument(
            "--model-parallel",
            type=positive_int,
            default=1,
            metavar="K",
            help="JAX only: split attention and feed-forward kernels over K devices (keras.distribution.ModelParallel; "
            "the batch over the rest) (default: 1)",
        )
    parser.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        help="JAX only: train with other processes through JAX's distributed runtime; process 0's address "
        "(with --num-processes and --process-id; data parallel over every process's devices)",
    )
    parser.add_argument("--num-processes", type=positive_int, help="how many processes train together")
    parser.add_argument("--process-id", type=non_negative_int, help="this process's index, 0 to N-1; 0 writes --out")
    parser.add_argument(
        "--join-timeout",
        type=positive_float,
        default=peers.DEFAULT_JOIN_TIMEOUT_S,
        metavar="SECONDS",
        help="how long the processes wait for each other to start before all stop naming the missing ones "
        "(default: %(default)s); each also checks that all were started with the same settings",
    )
    parser.add_argument(
        "--distributed",
        choices=("auto",),
        help="JAX only: join the cluster JAX detects (SLURM and the other launchers it knows), no flags needed",
    )


def add_training_kit(parser, defaults):
    """The flags of every option field of `defaults` (a task's settings: `training.configs.option`), each
    `--` and its name with dashes, checked by the field's own check, its default the task's; and the
    model's: `--drop-path`, `--remat`."""
    kit = parser.add_argument_group("training kit (defaults: the recipe's, the paper's settings)")
    kit.add_argument(
        "--drop-path",
        dest="drop_path_rate",
        type=dropout_rate,
        default=None,
        help="stochastic depth: block i of L drops each branch with probability RATE x i/(L-1) while training "
        "(timm's rule; keras_tse.layers.StochasticDepth) (default: off)",
    )
    kit.add_argument(
        "--remat",
        action="store_true",
        help="recompute each block's activations in the backward pass instead of keeping them: memory "
        "for compute (keras.RematScope; not the Transformer-XL, whose blocks write their memory)",
    )
    for field in options_of(defaults):
        value, metadata = getattr(defaults, field.name), field.metadata
        shown = metadata["shown"] or ("off" if value is None else value)
        options = {"choices": metadata["choices"]} if metadata["choices"] else {"type": checked_by(field)}
        flag = "--" + field.name.replace("_", "-")
        kit.add_argument(flag, dest=field.name, default=None, help=f"{metadata['help']} (default: {shown})", **options)


def checked_by(field):
    """A `type=` for a settings field: the text read as the field's type, then the field's own check; a
    value it refuses is one line saying what it expected (its check's words)."""

    def parse(text):
        value = _number(text, field.type, _expected(_refusal(field)))
        try:
            return field.metadata["check"](field.name, value)
        except ValueError as error:  # "`name` must be <expected>. Received: ..."
            raise _refuse(text, _expected(error)) from None

    parse.__name__ = field.name
    return parse


def _refusal(field):
    """The error of `field`'s check on a value no check takes (NaN), for the words of what it expects."""
    try:
        field.metadata["check"](field.name, math.nan)
    except ValueError as error:
        return error
    raise AssertionError(f"the check of {field.name} takes NaN")


def _expected(error):
    """What a check's ValueError ("`name` must be <expected>. Received: ...") says was expected."""
    return str(error).split(" must be ", 1)[-1].split(". Received", 1)[0]


def layout_option(text):
    """`KEY=VALUE` of `--layout-option`: VALUE a number, true or false."""
    key, equals, value = text.partition("=")
    if not equals or not key.isidentifier():
        raise _refuse(text, "KEY=VALUE, e.g. layer_scale_init=1e-4")
    if value.lower() in ("true", "false"):
        return key, value.lower() == "true"
    try:
        return key, float(value)
    except ValueError:
        raise _refuse(text, "KEY=VALUE with a number, true or false as VALUE") from None


def add_tau_arguments(parser):
    """`--tau` and `--learn-tau`: eq. (21)'s strength, and whether each block learns its own, alike on both tasks
    (`--trainable-tau` is the language model's name for it before the tasks shared one)."""
    parser.add_argument("--tau", type=tau, help="eq. (21)'s de-escalation strength in [0, 1] (default: 1, the paper's)")
    parser.add_argument(
        "--learn-tau",
        "--trainable-tau",
        action="store_true",
        help="learn tau, one per block, from --tau (default: fixed)",
    )


def add_lora_argument(parser, trained_whole=""):
    """`--lora-rank R`: fine-tune a --from-preset model through low-rank adapters (`keras_tse.zoo.enable_lora`),
    alike on both tasks; `trained_whole` names what trains whole beside them."""
    parser.add_argument(
        "--lora-rank",
        type=positive_int,
        default=None,
        metavar="R",
        help=f"with --from-preset: train rank-R LoRA adapters on every block's attention and FFN projections"
        f"{trained_whole}, every other weight frozen (keras_tse.zoo.enable_lora); the checkpoints are the merged "
        "models, each with its adapters beside it (checkpoints/best.lora.h5, last.lora.h5: zoo.load_lora_weights)",
    )


def add_task_arguments(parser, task, model, dataset, dataset_help, norms, default_norms, norm_note=""):
    """The flags every task of `keras-tse train` takes, declared once: `--norm` (of `norms`; `all`, the paper's
    three), `--model` (a family of `task`, `model` by default), `--dataset` (a data set of `task`, `dataset` by
    default) and `--epochs` (passes over the training data)."""
    from keras_tse.data.registry import list_datasets  # Keras-free

    parser.add_argument(
        "--norm",
        type=choice_list(norms, {"all": PAPER_NORMS}),
        default=default_norms,
        metavar="NAMES",
        help=f"the variants to train, comma-separated, of {', '.join(norms)}; all: the paper's three "
        f"(default){norm_note}",
    )
    parser.add_argument(
        "--model",
        default=model,
        metavar="FAMILY",
        help=f"the {task} model family: {model} (the paper's, default), another of the zoo, or one another package "
        "registers under the keras_tse.families entry point (its builder's keywords: the flags it takes)",
    )
    parser.add_argument("--dataset", choices=list_datasets(task), default=dataset, help=dataset_help)
    parser.add_argument("--epochs", type=positive_float, default=None, help="passes over the training data")


from keras_tse.training.plans import RUN_FOLDER  # noqa: E402 (--out's default; Keras-free)


def add_run_arguments(parser, hidden_help, init_help, smoke_help, batch_help):
    """The flags both training recipes take: where the data and the run go, the model-size and
    optimisation overrides, the seed, the weight scheme, the scale flags and `--smoke`."""
    parser.add_argument(
        "--data-dir",
        default=None,
        help="where the data set is or goes (default $KERAS_TSE_DATA_DIR or ~/.keras_tse/datasets)",
    )
    parser.add_argument("--no-download", action="store_true", help="never download; use --data-dir files only")
    parser.run_folder = RUN_FOLDER
    parser.add_argument("--out", default=None, help=f"run folder (default: {RUN_FOLDER}; ..._smoke with --smoke)")
    parser.add_argument("--depth", type=depth, default=None, help="override the number of blocks")
    parser.add_argument("--hidden-dim", type=positive_int, default=None, help=hidden_help)
    parser.add_argument("--learning-rate", type=positive_float, default=None, help="override every variant's lr")
    parser.add_argument("--batch-size", type=positive_int, default=None, help=batch_help)
    parser.add_argument("--similarity-every", type=positive_int, default=None, help="also measure every N batches")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of init, shuffling, dropout")
    parser.add_argument("--init", choices=INITIALIZERS, default=None, help=init_help)
    parser.add_argument(
        "--layout-option",
        type=layout_option,
        action="append",
        metavar="KEY=VALUE",
        help="one of the layout's own options (keras_tse.layouts), repeatable: layer_scale_init=1e-4 "
        "(layerscale), residual_scale=2 (deepnorm), ... (default: the layout's, for the depth)",
    )
    add_scale_arguments(parser)
    add_compile_cache(parser)
    parser.add_argument("--smoke", action="store_true", help=smoke_help)
    parser.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=None,
        help="fit's output: 1 a progress bar, 2 one line per epoch, 0 none (default: 1 on a terminal, else 2)",
    )
