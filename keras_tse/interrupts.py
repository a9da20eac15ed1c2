"""Ctrl-C (or SIGTERM, what `kill`, a job scheduler or a process manager sends) during a command, made to
stop a training run where its files are whole.

Python raises `KeyboardInterrupt` wherever the main thread is when SIGINT comes; under JAX that is often
inside the backend's garbage-collection hook, which swallows it (with a traceback on stderr) and training
goes on. While a command runs (`catch`) and a run trains (`keras_tse.callbacks.StopOnInterrupt` says so),
the first Ctrl-C only asks the run to stop, and the callback raises at the next batch end; outside
training, and at a second Ctrl-C, it stops at once. SIGTERM takes the same path: a scheduler that ends a
job with it gets the same whole files as Ctrl-C does."""

import signal
import threading

_REQUESTED = threading.Event()
_TRAINING = threading.Event()


def _on_signal(signum, frame):
    if _REQUESTED.is_set() or not _TRAINING.is_set():
        raise KeyboardInterrupt
    _REQUESTED.set()


def training(active):
    """Say whether a run is between its batches now (`StopOnInterrupt`'s train begin and end)."""
    (_TRAINING.set if active else _TRAINING.clear)()


SIGNALS = (signal.SIGINT, signal.SIGTERM)


def catch():
    """Route Ctrl-C and SIGTERM through this module in this process (from the main thread only, Python's
    rule); returns the handlers it replaced (None elsewhere), for `release`."""
    _REQUESTED.clear()
    _TRAINING.clear()  # a run an interrupt ended never reached its train end
    if threading.current_thread() is not threading.main_thread():
        return None
    return {signum: signal.signal(signum, _on_signal) for signum in SIGNALS}


def release(previous):
    """Put back the handlers `catch` replaced."""
    _TRAINING.clear()
    if previous is not None and threading.current_thread() is threading.main_thread():
        for signum, handler in previous.items():
            if handler is not None:  # None: set outside Python, which cannot be put back from here
                signal.signal(signum, handler)


def requested():
    """Whether a Ctrl-C came since `catch`."""
    return _REQUESTED.is_set()
