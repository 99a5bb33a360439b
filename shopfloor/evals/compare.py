"""`shopfloor eval compare A B`: the tasks whose outcome changed between two stored runs (a
harness change or a model change), and the ones only one run has."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ValidationError

from shopfloor.errors import UsageError
from shopfloor.models.eval_run import EvalResults, TaskOutcome


class Change(BaseModel):
    instance_id: str
    model: str
    before: str  # a category, or "absent"
    after: str

    @property
    def kind(self) -> str:
        if self.before == "resolved" and self.after != "resolved":
            return "regressed"
        if self.after == "resolved" and self.before != "resolved":
            return "fixed"
        return "changed"


def load_results(path: Path) -> EvalResults:
    """A run's results.json, given as the file, its folder, or a run id under `runs_dir`."""
    file = path / "results.json" if path.is_dir() else path
    try:
        return EvalResults.model_validate_json(file.read_bytes())
    except FileNotFoundError:
        raise UsageError(f"no eval results at {file}") from None
    except (OSError, ValidationError, ValueError) as exc:
        raise UsageError(f"{file} is not an eval run's results.json: {str(exc).splitlines()[0]}") from None


def changes(a: EvalResults, b: EvalResults) -> list[Change]:
    """Per (task, model): outcomes that differ. Runs of different models are matched by position
    when each ran exactly one model (a model change); otherwise by model label."""
    rename = {a.models[0]: b.models[0]} if len(a.models) == 1 and len(b.models) == 1 else {}

    def keyed(outcomes: list[TaskOutcome], names: dict[str, str]) -> dict[tuple[str, str], str]:
        return {(o.instance_id, names.get(o.model, o.model)): o.category for o in outcomes}

    before, after = keyed(a.outcomes, rename), keyed(b.outcomes, {})
    found = []
    for key in sorted(before.keys() | after.keys()):
        x, y = before.get(key, "absent"), after.get(key, "absent")
        if x != y:
            found.append(Change(instance_id=key[0], model=key[1], before=x, after=y))
    return found


def render(a: EvalResults, b: EvalResults, found: list[Change]) -> str:
    head = f"{a.run_id} → {b.run_id}: "
    if not found:
        return head + "no task changed outcome.\n"
    lines = [head + f"{len(found)} task(s) changed outcome.", ""]
    for c in found:
        lines.append(f"  {c.kind:9}  {c.instance_id}  [{c.model}]  {c.before} → {c.after}")
    return "\n".join(lines) + "\n"
