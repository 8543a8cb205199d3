"""Scale-out on Ray: coverage over shards of inputs, generation over shards of seeds.

Each worker is a Ray actor that loads the model once (a shipped name or a ``.keras`` path that
every node can read) and keeps it for every shard and every call while the runtime is up. For coverage it updates a fresh
criterion per shard and sends back the state's arrays (what ``coverage.statefile.save`` writes:
per-item maxima, first-input indices, edge fronts and bound changes; a few MB); the driver merges them in
shard order, which is exactly the single-process result (same covered set, same growth curve:
merging offsets each shard's input indices as if its inputs came after the previous shards').
For generation each actor runs the strategy on a contiguous block of whole batches of seeds
(``Generator.generate(part=...)``: target pools from the whole seed set, the batches' own random
streams), so every input is the one a single process makes, and the driver concatenates.

    from rnncon_core.jobs.distributed import coverage
    cov = coverage("mnist-lstm", x, "rconc", workers=2)          # a local Ray runtime
    cov = coverage("mnist-lstm", x, "rconc", address="ray://head:10001")   # a cluster
"""
from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from ..coverage import get_criterion
from ..errors import InputError, RNNConError
from ..generate import get_generator
from ..generate.base import GenerationResult
from ..lazy import available, ray, tf
from ..zoo import load_model

ProgressFn = Callable[[int, int], None]


def _ray():
    if not available(ray):
        raise RNNConError("Ray is not installed: `pip install ray` (it is in requirements.txt; "
                          "run `make setup`)") from None
    return ray


def check_address(address: str, timeout: float = 5.0) -> None:
    """Fail at once, with what to do, when nothing listens at a cluster's host:port (Ray itself
    retries for minutes, printing warnings). "auto" and addresses without a port are left to
    Ray."""
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise InputError(f"no Ray cluster answers at {address} ({e.strerror or e}): start one "
                         f"there (`ray start --head`) or give its head node's host:port "
                         f"(ray://host:10001 for a Ray client)") from None


@contextlib.contextmanager
def runtime(workers: int | None = None, address: str | None = None):
    """A Ray runtime for the duration: join ``address`` (an existing cluster) or start a local
    one with ``workers`` CPUs. Left running if it was already up."""
    ray = _ray()
    if workers is not None and int(workers) < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    if address:
        check_address(address)       # also when a runtime is already up in this process
    started = False
    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                # the actors do the work: at the driver's priority, not Ray's default nice 15
                # (which lets any other job on the machine starve them)
                os.environ.setdefault("RAY_worker_niceness", "0")
                ray.init(num_cpus=int(workers or os.cpu_count() or 1), include_dashboard=False,
                         log_to_driver=False, configure_logging=False)
        except Exception as e:  # Ray raises many kinds here; all mean "no runtime"
            where = f"the cluster at {address}" if address else "a local Ray runtime"
            raise RNNConError(f"could not start {where}: {type(e).__name__}: {e}") from None
        started = True
    try:
        yield ray
    finally:
        if started:
            _POOLS.clear()
            _DRIVER_MODELS.clear()
            ray.shutdown()


@contextlib.contextmanager
def _model_ref(model):
    """A reference every actor can load: a shipped name or a .keras path as given; an
    in-memory Keras model is saved to a temporary .keras file (local runtimes only)."""
    if isinstance(model, (str, os.PathLike)):
        yield str(model)
        return
    with tempfile.TemporaryDirectory(prefix="rnncon-ray-") as tmp:
        path = Path(tmp) / "model.keras"
        model.save(path)
        yield str(path)


class _Worker:
    """One actor: the model loaded once; criteria and generators made per call (their graphs
    are compiled once per model and configuration inside the actor, and reused)."""

    def __init__(self, model_ref: str):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        # TensorFlow's thread pools sized to the CPUs Ray gave this actor (by default each
        # would use every core of the node, and N actors would oversubscribe it N times)
        cpus = int(ray.get_runtime_context().get_assigned_resources().get("CPU", 0))
        if cpus:
            tf.config.threading.set_intra_op_parallelism_threads(cpus)
            tf.config.threading.set_inter_op_parallelism_threads(cpus)
        self.model = load_model(model_ref)

    def coverage(self, x, start: int, stop: int, embedded: bool, criterion: str,
                 params: dict) -> dict:
        crit = get_criterion(criterion, self.model, **params)
        crit.KEEP_INPUTS = 0
        crit.update(np.asarray(x[start:stop]), embedded=embedded)
        return crit.state()

    def generate(self, x, y, start: int, stop: int, method: str, params: dict):
        gen = get_generator(method, self.model, **params)
        return gen.generate(np.asarray(x), np.asarray(y), part=(start, stop))


_POOLS: dict = {}       # model reference -> actors, for the life of the runtime we started
_DRIVER_MODELS: dict = {}   # model reference -> the driver's own copy (merging states), as long


def _driver_model(model):
    """The Keras model the driver merges states on: loaded once per reference while the
    actors live (their compiled graphs and the model's fingerprint are kept with it)."""
    if not isinstance(model, (str, os.PathLike)):
        return model
    if str(model) not in _DRIVER_MODELS:
        _DRIVER_MODELS[str(model)] = load_model(model)
    return _DRIVER_MODELS[str(model)]


def _actors(ray, ref: str, workers: int) -> list:
    pool = _POOLS.setdefault(ref, [])
    Worker = ray.remote(num_cpus=1)(_Worker)
    while len(pool) < workers:
        pool.append(Worker.remote(ref))
    return pool[:workers]


def _shards(n: int, workers: int, shard_size: int | None) -> list[tuple[int, int]]:
    size = int(shard_size) if shard_size else max(1, -(-n // (4 * workers)))
    return [(a, min(n, a + size)) for a in range(0, n, size)]


def coverage(model, x, criterion: str = "rconc", *, workers: int = 2,
             address: str | None = None, shard_size: int | None = None,
             embedded: bool = False, progress: ProgressFn | None = None, **params):
    """The criterion over ``x`` computed by Ray actors; equal to ``get_criterion(criterion,
    model, **params).update(x)`` in one process. ``model``: a shipped name, a .keras path, or a
    Keras model (saved to a temporary file for a local runtime)."""
    x = np.asarray(x)
    if len(x) == 0:
        raise InputError("no inputs to measure")
    keras_model = _driver_model(model)
    result = get_criterion(criterion, keras_model, **params)      # checks params first
    result.tracer.check_inputs(x[:1], embedded)                    # and the inputs' shape
    shards = _shards(len(x), workers, shard_size)
    with _model_ref(model) as ref, runtime(workers, address) as ray:
        actors = _actors(ray, ref, min(workers, len(shards)))
        x_ref = ray.put(x)
        futures = [actors[i % len(actors)].coverage.remote(x_ref, a, b, embedded, criterion,
                                                           params)
                   for i, (a, b) in enumerate(shards)]
        done = 0
        pending = list(futures)
        while pending:              # progress as shards finish
            ready, pending = ray.wait(pending, num_returns=1)
            done += 1
            if progress is not None:
                progress(done, len(futures))
        states = ray.get(futures)
    for arrays in states:           # in shard order: exactly the single-process sequence
        part = get_criterion(criterion, keras_model, **params)
        part.load_state(arrays)
        result.merge(part)
    return result


def generate(model, x, y, method: str, *, workers: int = 2, address: str | None = None,
             progress: ProgressFn | None = None, should_stop: Callable[[], bool] | None = None,
             **params):
    """One generated input per seed, the seeds split over Ray actors in contiguous blocks of
    whole batches; returns the concatenated GenerationResult (``stopped`` when should_stop
    cancelled the shards not yet finished)."""
    x, y = np.asarray(x), np.asarray(y).reshape(-1)
    keras_model = _driver_model(model)
    probe = get_generator(method, keras_model, **params)          # checks params first
    x, y = probe.validate(x, y)
    batch = probe.batch_size
    per = -(-len(x) // max(1, workers))
    per = max(batch, -(-per // batch) * batch)                    # whole batches per shard
    shards = [(a, min(len(x), a + per)) for a in range(0, len(x), per)]
    with _model_ref(model) as ref, runtime(workers, address) as ray:
        actors = _actors(ray, ref, min(workers, len(shards)))
        x_ref, y_ref = ray.put(x), ray.put(y)
        futures = [actors[i % len(actors)].generate.remote(x_ref, y_ref, s, e, method, params)
                   for i, (s, e) in enumerate(shards)]
        results: dict = {}
        pending = list(futures)
        stopped = False
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            for r in ready:
                results[futures.index(r)] = ray.get(r)
                if progress is not None:
                    progress(sum(shards[i][1] - shards[i][0] for i in results), len(x))
            if pending and should_stop is not None and should_stop():
                for r in pending:
                    ray.cancel(r, force=True)
                stopped, pending = True, []
    prefix = []                      # the leading shards that finished: a prefix of the seeds
    while len(prefix) in results:
        prefix.append(results[len(prefix)])
    if not prefix:
        raise InputError("generation was cancelled before any shard finished")
    out = GenerationResult.concat(prefix)
    out.stopped = stopped or len(prefix) < len(shards)
    return out
