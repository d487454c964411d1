"""What the event engine (wirelessfl.sim.events.engine) and the event tiers' cloud (wirelessfl.sim.events.tiers)
do alike around an aggregation, written once: evaluate the model at a version, stop or checkpoint
after one, and evaluate the final model when the run ends.

Each works on an engine that has ``learner``, ``stop``, ``on_eval``, ``version``, ``env``,
``evals_at`` (the versions of the last two evaluations, which its checkpoints keep), ``stopping``,
``after_round``, ``_settle_pending``, ``_evaluate()`` (which an engine whose model is not the run's
makes a no-op: an edge's) and ``finish_run()``."""
from __future__ import annotations

from ...des.clock import CHECKPOINT
from ..round.parts import evaluate, final_evaluation_due

__all__ = ["after_aggregation", "evaluate_version", "final_evaluation"]


def evaluate_version(engine) -> None:
    """Evaluate the model at the engine's version (training runs) and remember that version."""
    if engine.learner is not None:
        engine.evals_at = [*engine.evals_at[-1:], engine.version]
        evaluate(engine.learner, engine.stop, engine.on_eval, engine.version, float(engine.env.now))


def final_evaluation(engine) -> None:
    """The run ended: evaluate the final model if it changed since the last evaluation."""
    if final_evaluation_due(engine.learner, engine.evals_at[-1] if engine.evals_at else None, engine.version):
        engine._evaluate()


def after_aggregation(engine, now: float) -> None:
    """An aggregation is done (and evaluated if due): stop if the stop rule says so, else checkpoint
    between events (SimPy's own events of this instant first, then the runner's ``after_round``,
    once however many aggregations the instant has)."""
    if engine.stop.done(engine.version, now):
        engine.finish_run()
    elif engine.after_round is not None and not engine._settle_pending:
        engine._settle_pending = True
        engine.env.at(now, CHECKPOINT).callbacks.append(lambda _: _between_events(engine))


def _between_events(engine) -> None:
    engine._settle_pending = False
    if not engine.stopping:
        engine.after_round(engine)
