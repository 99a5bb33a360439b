"""The simulator's pre-receive hook: GitHub's refusals of a push, decided before any ref moves.

git runs it (`python -m shopfloor.simulator.git.pre_receive`) inside receive-pack with the pushed
objects in quarantine and one `<old> <new> <ref>` line per ref on stdin. What the pusher may do
arrives as JSON in `SHOPFLOOR_SIM_PUSH_RULES` (`PushRules`, written by the HTTP layer). A refusal
prints GitHub's words (git shows them as `remote: …`) and exits 1, so the whole push is rejected
and no ref moves, as on GitHub. Standard library only: it starts once per push.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

RULES_ENV = "SHOPFLOOR_SIM_PUSH_RULES"
ZERO = "0" * 40
WORKFLOWS_DIR = ".github/workflows/"


@dataclass(frozen=True)
class PushRules:
    """What one pusher may do to one repository, beyond having write access."""

    # False for a GitHub App's bot without the `workflows` permission.
    may_change_workflows: bool = True
    # Protected branch → GitHub's reasons any direct push there is refused (empty: a fast-forward
    # may land; deleting a protected branch or force-pushing to it never may).
    protected: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"may_change_workflows": self.may_change_workflows, "protected": self.protected})

    @classmethod
    def from_json(cls, text: str) -> PushRules:
        raw = json.loads(text)
        return cls(may_change_workflows=bool(raw["may_change_workflows"]), protected=dict(raw["protected"]))

    @property
    def restricts(self) -> bool:
        return not self.may_change_workflows or bool(self.protected)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def workflow_files_changed(new: str) -> list[str]:
    """Workflow files changed by the commits this push brings (those no existing ref reaches)."""
    out = _git("log", "--format=", "--name-only", "-m", "--root", new, "--not", "--all", "--", WORKFLOWS_DIR)
    return sorted({line for line in out.splitlines() if line.startswith(WORKFLOWS_DIR)})


def _forced(old: str, new: str) -> bool:
    if old == ZERO:
        return False
    done = subprocess.run(["git", "merge-base", "--is-ancestor", old, new], check=False, capture_output=True)
    return done.returncode != 0


def refusals(rules: PushRules, updates: list[tuple[str, str, str]]) -> list[str]:
    """GitHub's messages for what this push may not do; empty when it may land."""
    for old, new, ref in updates:
        branch = ref.removeprefix("refs/heads/")
        reasons = rules.protected.get(branch) if ref.startswith("refs/heads/") else None
        if reasons is not None:
            if new == ZERO:
                reasons = ["Cannot delete this protected branch"]
            elif not reasons and _forced(old, new):
                reasons = ["Cannot force-push to this branch"]
        if reasons:
            return [f"error: GH006: Protected branch update failed for {ref}.", *(f"error: {r}" for r in reasons)]
        if new != ZERO and not rules.may_change_workflows:
            changed = workflow_files_changed(new)
            if changed:
                return [
                    f"refusing to allow a GitHub App to create or update workflow `{changed[0]}` "
                    "without `workflows` permission"
                ]
    return []


def main() -> int:
    text = os.environ.get(RULES_ENV)
    if not text:
        return 0
    rules = PushRules.from_json(text)
    updates = []
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 3:
            updates.append((parts[0], parts[1], parts[2]))
    said = refusals(rules, updates)
    for line in said:
        print(line, file=sys.stderr)
    return 1 if said else 0


if __name__ == "__main__":
    sys.exit(main())
