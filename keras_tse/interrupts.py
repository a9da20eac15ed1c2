"""Ctrl-C during a command, made to stop a training run where its files are whole.

Python raises `KeyboardInterrupt` wherever the main thread is when SIGINT comes; under JAX that is often
inside the backend's garbage-collection hook, which swallows it (with a traceback on stderr) and training
goes on. While a command runs (`catch`) and a run trains (`keras_tse.callbacks.StopOnInterrupt` says so),
the first Ctrl-C only asks the run to stop, and the callback raises at the next batch end; outside
training, and at a second Ctrl-C, it stops at once."""

import signal
import threading

_REQUESTED = threading.Event()
_TRAINING = threading.Event()


def _on_sigint(signum, frame):
    if _REQUESTED.is_set() or not _TRAINING.is_set():
        raise KeyboardInterrupt
    _REQUESTED.set()


def training(active):
    """Say whether a run is between its batches now (`StopOnInterrupt`'s train begin and end)."""
    (_TRAINING.set if active else _TRAINING.clear)()


def catch():
    """Route Ctrl-C through this module in this process (from the main thread only, Python's rule);
    returns the handler it replaced (None elsewhere), for `release`."""
    _REQUESTED.clear()
    _TRAINING.clear()  # a run an interrupt ended never reached its train end
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, _on_sigint)


def release(previous):
    """Put back the handler `catch` replaced."""
    _TRAINING.clear()
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, previous)


def requested():
    """Whether a Ctrl-C came since `catch`."""
    return _REQUESTED.is_set()
