"""Run the properties of loaded specs: pick engines, apply overrides, contain failures as verdicts.

A check never crashes the CLI: an engine bug becomes verdict ``error`` with its message, and a
``ReplayMismatch`` (an engine claimed a violation the interpreter does not reproduce) becomes ``error``
with both values. Nothing here prints.

``check_all`` is the CLI's entry point: it serves definite verdicts from the proof cache, and runs the
remaining properties in order or, with ``jobs > 1``, in worker processes. A worker job is a pure function
of (spec path, property index, overrides): the worker re-loads the spec itself, so no model is pickled.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from pathlib import Path
from typing import Callable, Sequence

from .properties import CheckRequest, registry
from .semantics import UnsupportedInMode
from .spec import PropertySpec, Spec, SpecError, load_spec
from .verdict import ERROR, UNKNOWN, Verdict
from .witness import ReplayMismatch


@dataclasses.dataclass
class Overrides:
    engine: str | None = None
    timeout: float | None = None
    minimize: bool = False
    smt2_dir: Path | None = None
    device: str = "auto"


def build_request(spec: Spec, prop: PropertySpec, overrides: Overrides,
                  progress: Callable[[int, int | None], None] | None = None) -> CheckRequest:
    definition = registry()[prop.name]
    engine = overrides.engine or prop.engine or spec.engine
    if engine != "auto" and engine not in definition.engines:
        engine = "auto"  # a global override the property cannot honour falls back to its own choice
    timeout = overrides.timeout or prop.timeout or spec.timeout
    request = CheckRequest(model=spec.model, arithmetic=spec.arithmetic, domain=spec.domain, options=prop.options,
                           label=prop.label, engine=engine, timeout=timeout, seed=spec.seed,
                           minimize=overrides.minimize, smt2_dir=overrides.smt2_dir, device=overrides.device,
                           progress=progress)
    request.engine = definition.pick_engine(request)
    return request


def check_property(spec: Spec, prop: PropertySpec, overrides: Overrides,
                   progress: Callable[[int, int | None], None] | None = None) -> Verdict:
    start = time.perf_counter()
    engine = "?"
    try:
        request = build_request(spec, prop, overrides, progress)
        engine = request.engine
        verdict = registry()[prop.name].run(request)
    except ReplayMismatch as exc:
        verdict = Verdict(prop.label, ERROR, engine, detail=f"engine bug: {exc}",
                          statistics={"claimed": str(exc.claimed), "replayed": str(exc.replayed)})
    except UnsupportedInMode as exc:
        verdict = Verdict(prop.label, UNKNOWN, engine, detail=str(exc), tried=[engine])
    except Exception as exc:  # contain it: report, never crash the run
        verdict = Verdict(prop.label, ERROR, engine, detail=f"internal error: {type(exc).__name__}: {exc}",
                          statistics={"traceback": traceback.format_exc(limit=8)})
    verdict.seconds = verdict.seconds or (time.perf_counter() - start)
    verdict.spec = str(spec.path)
    verdict.index = prop.index
    return verdict



def check_job(spec_path: str, index: int, overrides: Overrides) -> Verdict:
    """One unit of work for a worker process: re-load the spec and check its property number ``index``."""
    try:
        spec = load_spec(spec_path)
        prop = spec.properties[index]
    except (SpecError, IndexError) as exc:  # the file changed between the parent's load and this one
        verdict = Verdict(f"property {index}", ERROR, "?", detail=f"cannot re-load the spec in the worker: {exc}")
        verdict.spec, verdict.index = spec_path, index
        return verdict
    return check_property(spec, prop, overrides)


ProgressFactory = Callable[[Spec, PropertySpec], Callable[[int, int | None], None]]


def check_all(specs: Sequence[Spec], overrides: Overrides, *, jobs: int = 1, cache=None,
              progress: ProgressFactory | None = None,
              on_verdict: Callable[[Verdict], None] | None = None) -> list[Verdict]:
    """Verdicts for every property of every spec, in spec order then property order.

    ``cache`` is a ``cache.ProofCache`` or None. ``progress(spec, prop)`` returns the tick callback of one
    sequential check (it may have a ``close()``); ``on_verdict`` is called as each verdict arrives.
    """
    from .cache import key_material, key_of, served_from_cache

    work = [(spec, prop) for spec in specs for prop in spec.properties]
    verdicts: list[Verdict | None] = [None] * len(work)
    keys: list[str | None] = [None] * len(work)
    pending: list[int] = []
    for slot, (spec, prop) in enumerate(work):
        if cache is not None:
            start = time.perf_counter()
            material = _safe_key_material(key_material, spec, prop, overrides)
            if material is not None:
                keys[slot] = key_of(material)
                hit = cache.get(keys[slot])
                if hit is not None:
                    verdicts[slot] = served_from_cache(hit, prop, str(spec.path), time.perf_counter() - start)
                    if on_verdict is not None:
                        on_verdict(verdicts[slot])
                    continue
        pending.append(slot)

    def finish(slot: int, verdict: Verdict) -> None:
        verdicts[slot] = verdict
        if cache is not None and keys[slot] is not None:
            cache.put(keys[slot], verdict)
        if on_verdict is not None:
            on_verdict(verdict)

    if jobs > 1 and len(pending) > 1:
        _run_in_pool(work, pending, overrides, min(jobs, len(pending)), finish)
    else:
        for slot in pending:
            spec, prop = work[slot]
            tick = progress(spec, prop) if progress is not None else None
            try:
                verdict = check_property(spec, prop, overrides, tick)
            finally:
                if hasattr(tick, "close"):
                    tick.close()
            finish(slot, verdict)
    return [v for v in verdicts if v is not None]


def _safe_key_material(key_material, spec: Spec, prop: PropertySpec, overrides: Overrides):
    """A property whose engine choice itself fails is simply not cached; check_property reports the failure."""
    try:
        return key_material(spec, prop, overrides)
    except Exception:
        return None


def _run_in_pool(work, pending: list[int], overrides: Overrides, workers: int,
                 finish: Callable[[int, Verdict], None]) -> None:
    """Worker processes are spawned (not forked): the parent may hold threads (progress bars, solvers)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(check_job, str(work[slot][0].path), work[slot][1].index, overrides): slot
                   for slot in pending}
        try:
            for future in as_completed(futures):
                slot = futures[future]
                spec, prop = work[slot]
                try:
                    verdict = future.result()
                except BrokenProcessPool as exc:
                    verdict = Verdict(prop.label, ERROR, "?", detail=f"worker process died: {exc}")
                    verdict.spec, verdict.index = str(spec.path), prop.index
                except Exception as exc:  # e.g. a verdict that cannot be sent back: report, never crash
                    verdict = Verdict(prop.label, ERROR, "?",
                                      detail=f"worker failed: {type(exc).__name__}: {exc}")
                    verdict.spec, verdict.index = str(spec.path), prop.index
                finish(slot, verdict)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
