"""Which model runs each task of an eval: `--model` values, with `scripted:DIR` (or
`scripted:builtin`) expanded to the cassette DIR holds for each task."""

from __future__ import annotations

from pathlib import Path

from shopfloor.errors import UsageError
from shopfloor.evals.suites import BUILTIN, Suite
from shopfloor.models.eval_run import EvalModel
from shopfloor.models.model_spec import ModelSpec

SCRIPTED = "scripted:"


def eval_models(given: list[str], suite: Suite, default_model: str) -> list[EvalModel]:
    """The models of an eval run. Without `--model`: the configured model when it is a real one,
    else the built-in suite's own scripted model (other suites have none: a model must be named)."""
    chosen = list(dict.fromkeys(given))
    if not chosen:
        if not default_model.startswith(SCRIPTED):
            chosen = [default_model]
        elif suite.scripted_dir:
            chosen = [f"{SCRIPTED}{BUILTIN}"]
        else:
            raise UsageError("name a model: --model provider:model (SHOPFLOOR_MODEL is a scripted one)")
    return [_model(m, suite) for m in chosen]


def _model(label: str, suite: Suite) -> EvalModel:
    try:
        ModelSpec.parse(label)
    except ValueError as exc:
        raise UsageError(f"--model {label}: {exc}") from None
    if not label.startswith(SCRIPTED):
        return EvalModel(label=label, model=label)
    name = label[len(SCRIPTED) :]
    folder = Path(suite.scripted_dir) if name == BUILTIN and suite.scripted_dir else Path(name)
    if not folder.is_dir():
        return EvalModel(label=label, model=label)  # one cassette for every task
    missing = [t.instance_id for t in suite.tasks if not (folder / f"{t.instance_id}.json").is_file()]
    if missing:
        raise UsageError(f"--model {label}: no cassette for {', '.join(missing)} in {folder}")
    by_task = {t.instance_id: f"{SCRIPTED}{(folder / f'{t.instance_id}.json').resolve()}" for t in suite.tasks}
    return EvalModel(label=label, model=label, by_task=by_task)
