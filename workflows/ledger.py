"""LedgerWorkflow `ledger/<task queue>`: the one place runs and spend are counted and limits kept.

Pipelines ask it to start (`request`, signal-with-started by an activity, so the first ask
creates it) and report what they spent (`spend`, cumulative, `final` when they end). It admits
requests in the order they came while every limit in force allows one more run: per repository
and in total, runs and cost per UTC day and month, and pipelines at once. A request that does not
fit waits, and is told why (the `ledger_admission` signal to its workflow, sent again only when
the reason changes); it is admitted when a run ends, the day rolls over (a timer at the next UTC
midnight) or an operator raises a limit (`set_limits`, from `shopfloor budget set`).

A pipeline parked for a person steps aside (`spend` with `stepped_aside`): its slot is free and
its run stays counted; resumed, it asks again under the same key, and is then held by the slots
and the spend budgets only.

Exactly once: a run is counted when admitted, under its key (workflow id and first run id), so a
repeated request is only answered again; cost is counted as the difference to the last
cumulative figure seen for the key, so a repeated report adds nothing. Continue-as-new carries the
whole state.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from shopfloor.models.ledger import (
        ADMISSION_SIGNAL,
        LEDGER_QUERY,
        LEDGER_WORKFLOW,
        LIMIT_FIELDS,
        REQUEST_SIGNAL,
        SET_LIMITS_UPDATE,
        SPEND_SIGNAL,
        Account,
        AdmissionReply,
        AdmissionRequest,
        LedgerState,
        LedgerView,
        LimitChange,
        Limits,
        RepoView,
        Spend,
        Usage,
    )

DAYS_KEPT = 40
MONTHS_KEPT = 13
ENDED_KEPT = 2000
TOTAL = "the factory"


def day_of(now: datetime) -> str:
    return now.strftime("%Y-%m-%d")


def month_of(now: datetime) -> str:
    return now.strftime("%Y-%m")


def _usage(account: Account, day: str, month: str) -> tuple[Usage, Usage]:
    return account.days.setdefault(day, Usage()), account.months.setdefault(month, Usage())


# Each budget: its limit, which period's usage it reads, what it counts, and the option raising it.
_BUDGETS = (
    ("runs_per_day", "day", "runs", "--runs-per-day N"),
    ("runs_per_month", "month", "runs", "--runs-per-month N"),
    ("cost_usd_per_day", "day", "cost_usd", "--cost-per-day USD"),
    ("cost_usd_per_month", "month", "cost_usd", "--cost-per-month USD"),
)


def _over(
    limits: Limits, today: Usage, month: Usage, running: int, who: str, repo: str | None, counted: bool = False
) -> tuple[str, str]:
    """(why it must wait, "budget" or "queue"), or ("", "") when one more run fits. `counted`: a
    run already counted (back from waiting for a person) is held by the slots and the spend
    budgets, not by the run limits."""
    if limits.max_running is not None and running >= limits.max_running:
        return f"{who} runs at most {limits.max_running} at once ({running} running)", "queue"
    for field, period, counted_as, option in _BUDGETS:
        if counted and counted_as == "runs":
            continue
        limit, used = getattr(limits, field), getattr(today if period == "day" else month, counted_as)
        if limit is None or used < limit:
            continue
        daily = period == "day"
        if counted_as == "runs":
            what = f"{'daily' if daily else 'monthly'} limit of {limit} run(s) is reached ({used} "
        else:
            what = f"{'daily' if daily else 'monthly'} budget of ${limit:g} is spent (${used:.4f} "
        when = "when the day rolls over" if daily else "next month"
        raise_it = f"`shopfloor budget set {repo or '--total'} {option}`"
        return (
            f"{who}'s {what}{'today' if daily else 'this month'}, UTC); it starts {when}, "
            f"or when an operator raises it ({raise_it})",
            "budget",
        )
    return "", ""


@workflow.defn(name=LEDGER_WORKFLOW)
class LedgerWorkflow:
    @workflow.init
    def __init__(self, state: LedgerState) -> None:
        self.s = state
        self._dirty = True
        self._outbox: list[tuple[str, AdmissionReply]] = []

    # -- messages ------------------------------------------------------------------------------

    @workflow.signal(name=REQUEST_SIGNAL)
    def request(self, req: AdmissionRequest) -> None:
        s = self.s
        s.operator[req.repo], s.repo_file[req.repo], s.total_limits = req.operator, req.repo_file, req.total
        if req.key in s.admitted and req.key not in s.aside:  # asked again (a retried activity): answer again
            self._outbox.append((req.workflow_id, AdmissionReply(key=req.key, round=req.round, admitted=True)))
        elif req.key not in s.ended and all(p.key != req.key for p in s.pending):
            s.pending.append(req)  # new, or back from waiting for a person (counted already)
        self._dirty = True

    @workflow.signal(name=SPEND_SIGNAL)
    def spend(self, sp: Spend) -> None:
        s = self.s
        if sp.key in s.ended:
            return
        if sp.key in s.admitted:
            delta = round(sp.cost_usd - s.spent.get(sp.key, 0.0), 9)
            if delta > 0:
                now = workflow.now()
                for account in (self._repo(sp.repo), s.total):
                    for usage in _usage(account, day_of(now), month_of(now)):
                        usage.cost_usd = round(usage.cost_usd + delta, 9)
                s.spent[sp.key] = sp.cost_usd
        if (sp.final or sp.stepped_aside) and sp.key in s.admitted:
            for account in (s.total, *s.repos.values()):
                account.running = [k for k in account.running if k != sp.key]
            if sp.stepped_aside and sp.key not in s.aside:
                s.aside.append(sp.key)
        if sp.final:
            s.pending = [p for p in s.pending if p.key != sp.key]  # it ended while it waited
            for account in (s.total, *s.repos.values()):
                account.running = [k for k in account.running if k != sp.key]
            s.aside = [k for k in s.aside if k != sp.key]
            s.admitted.pop(sp.key, None)
            s.spent.pop(sp.key, None)
            s.said.pop(sp.key, None)
            s.said_kind.pop(sp.key, None)
            s.ended = [*s.ended, sp.key][-ENDED_KEPT:]
        self._dirty = True

    @workflow.update(name=SET_LIMITS_UPDATE)
    def set_limits(self, change: LimitChange) -> LedgerView:
        account = self.s.total if change.repo is None else self._repo(change.repo)
        updates = {f: getattr(change.limits, f) for f in LIMIT_FIELDS if getattr(change.limits, f) is not None}
        updates.update({f: None for f in change.clear})
        account.override = account.override.model_copy(update=updates)
        self._dirty = True
        return self.view()

    @set_limits.validator
    def _check_limits(self, change: LimitChange) -> None:
        unknown = [f for f in change.clear if f not in LIMIT_FIELDS]
        if unknown:
            raise ValueError(f"no such limit: {', '.join(unknown)} (limits: {', '.join(LIMIT_FIELDS)})")
        if not change.limits.set_any() and not change.clear:
            raise ValueError("nothing to change: give a limit to set or to clear")

    @workflow.query(name=LEDGER_QUERY)
    def view(self) -> LedgerView:
        s, now = self.s, workflow.now()
        day, month = day_of(now), month_of(now)
        repos = sorted(set(s.repos) | set(s.operator))
        return LedgerView(
            day=day,
            month=month,
            total=self._view(TOTAL, s.total, self._total_limits(), [p for p in s.pending], day, month),
            repos=[
                self._view(
                    r, s.repos.get(r, Account()), self._limits(r), [p for p in s.pending if p.repo == r], day, month
                )
                for r in repos
            ],
        )

    def _view(
        self, name: str, account: Account, limits: Limits, queued: list[AdmissionRequest], day: str, month: str
    ) -> RepoView:
        return RepoView(
            repo=name,
            today=account.days.get(day, Usage()),
            month=account.months.get(month, Usage()),
            running=len(account.running),
            queued=[p.workflow_id for p in queued],
            limits=limits,
            waiting={p.workflow_id: self.s.said[p.key] for p in queued if p.key in self.s.said},
        )

    # -- the loop ------------------------------------------------------------------------------

    @workflow.run
    async def run(self, state: LedgerState) -> None:
        while True:
            budget_bound = any(self.s.said_kind.get(p.key) == "budget" for p in self.s.pending)
            try:
                await workflow.wait_condition(
                    lambda: self._dirty or bool(self._outbox),
                    timeout=self._until_midnight() if budget_bound else None,
                    timeout_summary="the UTC day rolls over: budgets start again",
                )
            except TimeoutError:
                pass
            self._dirty = False
            self._prune()
            self._admit()
            while self._outbox:  # told together: one slow answer holds none of the others back
                batch, self._outbox = self._outbox, []
                await asyncio.gather(*(self._tell(target, reply) for target, reply in batch))
            if workflow.info().is_continue_as_new_suggested() and not self._dirty:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.s)

    def _admit(self) -> None:
        s, now = self.s, workflow.now()
        day, month = day_of(now), month_of(now)
        waiting_repos: set[str] = set()  # a repository's runs start in the order they asked
        everything_waits = False  # the total's limits hold every repository's requests back
        still: list[AdmissionRequest] = []
        for req in s.pending:
            repo = self._repo(req.repo)
            total_today, total_month = _usage(s.total, day, month)
            counted = req.key in s.admitted  # back from waiting for a person: its run counts already
            why, kind = _over(
                self._total_limits(), total_today, total_month, len(s.total.running), TOTAL, None, counted
            )
            if why:
                everything_waits = True
            elif everything_waits:
                why, kind = "queued behind earlier runs of the factory", "queue"
            else:
                repo_today, repo_month = _usage(repo, day, month)
                why, kind = _over(
                    self._limits(req.repo), repo_today, repo_month, len(repo.running), req.repo, req.repo, counted
                )
                if not why and req.repo in waiting_repos:
                    why, kind = f"queued behind an earlier run of {req.repo}", "queue"
            if not why:
                for account in (repo, s.total):
                    account.running.append(req.key)
                    for usage in () if counted else _usage(account, day, month):
                        usage.runs += 1  # once per run: not again when it comes back from waiting for a person
                s.admitted[req.key] = s.admitted.get(req.key, day)
                s.aside = [k for k in s.aside if k != req.key]
                s.said.pop(req.key, None)
                self.s.said_kind.pop(req.key, None)
                reply = AdmissionReply(key=req.key, round=req.round, admitted=True)
                self._outbox.append((req.workflow_id, reply))
                continue
            waiting_repos.add(req.repo)
            ahead = sum(1 for p in still if p.repo == req.repo)
            text = why + (f"; {ahead} ahead of it" if ahead else "")
            still.append(req)
            self.s.said_kind[req.key] = kind
            if s.said.get(req.key) != text:
                s.said[req.key] = text
                reply = AdmissionReply(key=req.key, round=req.round, admitted=False, reason=text, waiting_for=kind)  # type: ignore[arg-type]
                self._outbox.append((req.workflow_id, reply))
        s.pending = still

    async def _tell(self, workflow_id: str, reply: AdmissionReply) -> None:
        try:
            await workflow.get_external_workflow_handle(workflow_id).signal(ADMISSION_SIGNAL, reply)
        except FailureError as exc:  # the pipeline's run is gone: its slot and place are free
            workflow.logger.info("ledger: %s is gone (%s); its slot is freed", workflow_id, exc)
            self.spend(Spend(key=reply.key, repo="", final=True))

    # -- helpers ---------------------------------------------------------------------------------

    def _repo(self, repo: str) -> Account:
        return self.s.repos.setdefault(repo, Account())

    def _limits(self, repo: str) -> Limits:
        """In force for `repo`: the operator's settings with its overrides, lowered by the policy file's."""
        operator = self.s.operator.get(repo, Limits()).overridden_by(self._repo(repo).override)
        return operator.lower(self.s.repo_file.get(repo, Limits()))

    def _total_limits(self) -> Limits:
        return self.s.total_limits.overridden_by(self.s.total.override)

    def _until_midnight(self) -> timedelta:
        now = workflow.now()
        midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        return midnight - now + timedelta(seconds=1)

    def _prune(self) -> None:
        for account in (self.s.total, *self.s.repos.values()):
            for kept, limit in ((account.days, DAYS_KEPT), (account.months, MONTHS_KEPT)):
                for old in sorted(kept)[:-limit]:
                    del kept[old]
