"""A pipeline's place in the spend ledger (workflows/ledger.py): it asks to start before any agent
runs, waits — saying why on its progress comment and in `status` — while a budget or a
concurrency limit holds it, reports its cumulative cost after each agent run, steps aside while
it is parked for a person (and asks again when resumed), and says when it ends, which frees its
slot.

Only when the ledger is on (the operator's `ledger` setting) or a limit is set, by the operator
or in the repository's policy; otherwise nothing here sends anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.policy import RepoPolicy
    from shopfloor.models.factory_config import FactoryConfig
    from shopfloor.models.ledger import AdmissionReply, AdmissionRequest, Limits, Spend
    from shopfloor.workflows.activity_catalogue import LEDGER_REQUEST, LEDGER_SPEND, call

if TYPE_CHECKING:
    from shopfloor.workflows.progress import ProgressComment

LEDGER_PATCH = "ledger-admission"


def repo_file_limits(policy: RepoPolicy) -> Limits:
    b = policy.budgets
    return Limits(
        runs_per_day=b.runs_per_day,
        runs_per_month=b.runs_per_month,
        cost_usd_per_day=b.cost_usd_per_day,
        cost_usd_per_month=b.cost_usd_per_month,
    )


class Admission:
    def __init__(self, repo: str, part: str = "", spent_before: float = 0.0) -> None:
        """`part`: this run is one part of its workflow (a pull request's review round), counted
        on its own; `spent_before`: what the workflow had spent before it (not this run's)."""
        self.repo = repo
        self.part = part
        self.spent_before = spent_before
        self.key = ""
        self.asked = False
        self.admitted = False
        self.reply: AdmissionReply | None = None
        self._request: AdmissionRequest | None = None
        self._reported = -1.0

    def on_reply(self, reply: AdmissionReply) -> None:
        if reply.key != self.key or self._request is None or reply.round != self._request.round:
            return  # an answer to an earlier run of this workflow id, or to an earlier ask
        self.reply = reply
        self.admitted = self.admitted or reply.admitted

    def _prepare(self, config: FactoryConfig, repo_file: Limits) -> bool:
        """Build this run's request (its key: the workflow's first run, and the part); False when no
        ledger is in use (none on, no limit set) or the workflow's history predates the ledger."""
        if not (config.ledger or config.repo_limits.set_any() or config.total_limits.set_any() or repo_file.set_any()):
            return False
        if not workflow.patched(LEDGER_PATCH):
            return False
        info = workflow.info()
        self.key = f"{info.workflow_id}#{info.first_execution_run_id}" + (f"#{self.part}" if self.part else "")
        self._request = AdmissionRequest(
            key=self.key,
            workflow_id=info.workflow_id,
            repo=self.repo,
            operator=config.repo_limits,
            repo_file=repo_file,
            total=config.total_limits,
            asked_at=workflow.now(),
        )
        return True

    async def admit(self, config: FactoryConfig, policy: RepoPolicy, progress: ProgressComment) -> None:
        """Return once the ledger lets this pipeline start (at once when no ledger is in use)."""
        if self._prepare(config, repo_file_limits(policy)):
            await self._ask(progress, f"ask the spend ledger to start a run of {self.repo}")

    async def try_admit(self, config: FactoryConfig) -> str:
        """Ask once without waiting (an alert's assessment, which the rules can stand in for):
        "" when admitted (or no ledger is in use); else why not, and the request is withdrawn."""
        if not self._prepare(config, Limits()):
            return ""
        assert self._request is not None
        await call(LEDGER_REQUEST, self._request, summary=f"ask the spend ledger for a run on {self.repo}")
        self.asked = True
        await workflow.wait_condition(lambda: self.admitted or self.reply is not None)
        if self.admitted:
            return ""
        assert self.reply is not None
        reason = self.reply.reason
        await self.report(0.0, final=True)  # withdrawn: it does not wait
        return reason

    async def step_aside(self) -> None:
        """The run waits for a person (parked): its slot goes to the next run in line."""
        if not self.asked or not self.admitted:
            return
        self.admitted, self.reply = False, None
        await call(
            LEDGER_SPEND,
            Spend(key=self.key, repo=self.repo, cost_usd=max(self._reported, 0.0), stepped_aside=True),
            summary="tell the spend ledger: waiting for a person, the slot is free",
        )

    async def rejoin(self, progress: ProgressComment) -> None:
        """Resumed after waiting for a person: wait for a slot again (its run counts already)."""
        if not self.asked or self.admitted or self._request is None:
            return
        self._request = self._request.model_copy(update={"round": self._request.round + 1, "asked_at": workflow.now()})
        await self._ask(progress, f"ask the spend ledger to go on with a run of {self.repo}")

    async def _ask(self, progress: ProgressComment, summary: str) -> None:
        assert self._request is not None
        await call(LEDGER_REQUEST, self._request, summary=summary)
        self.asked = True
        shown = ""
        while True:

            def answered(shown: str = shown) -> bool:  # admitted, or a new reason to show
                return self.admitted or (self.reply is not None and self.reply.reason != shown)

            await workflow.wait_condition(answered)
            if self.admitted:
                break
            assert self.reply is not None
            shown = self.reply.reason
            progress.stage("policy")
            progress.state.reason = shown  # what `status` and the `factory` query say
            await progress.show("waiting", waiting_for=self.reply.waiting_for or "queue", reason=shown)
        if shown:
            progress.state.reason = ""
            progress.outcome("the spend ledger let it start")

    async def report(self, cost_usd: float, *, final: bool = False) -> None:
        """Tell the ledger what the run has spent so far (and, `final`, that it ended)."""
        cost_usd = max(cost_usd - self.spent_before, 0.0)
        if not self.asked or (cost_usd == self._reported and not final):
            return
        self._reported = cost_usd
        await call(
            LEDGER_SPEND,
            Spend(key=self.key, repo=self.repo, cost_usd=round(cost_usd, 9), final=final),
            summary=f"tell the spend ledger: ${cost_usd:.4f} so far" + (", ended" if final else ""),
        )
