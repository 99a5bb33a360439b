"""`/shopfloor <command>` comments: who may give them, and the reply to those who may not
(docs/design.md, Trust and safety).

Every command needs write access (write, maintain or admin) to the repository: fix,
review-on-request, approve and merge by design; approve-call and reject-call (the answer to a tool
call waiting for an operator, workflows/call_waits.py) too; stop, pause and resume too, because
otherwise anyone able to comment could halt a maintainer's run. Permissions come from GitHub through the
`github_permission` activity and are cached per (repo, login) for PERMISSION_TTL of workflow
time, so a burst of comments costs one call. A refused command gets one reply on the issue/PR
(an upserted marker comment per comment id, so a retry or a second delivery never posts twice);
the reply quotes the command name only, never the user's text. People's feedback on a pull
request (workflows/feedback.py) from anyone without write access gets the same kind of reply,
one per review (its line comments share it), which never quotes it either.

A command from a pull request counts only on the run that owns that pull request: its own run,
or the issue run that opened it (the number it recorded when it found or created the PR by its
`shopfloor/issue-<n>` branch). A comment routed here from any other pull request is ignored, so
no text in a pull request's body can carry a maintainer's command into another issue's run.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from shopfloor.agents.github_text import reply_ref, safe_login
    from shopfloor.models import failure_types
    from shopfloor.models.github_ops import PermissionInput
    from shopfloor.models.inbox import RepoEvent
    from shopfloor.models.inbox_state import CachedPermission, CommandRecord, InboxCarry
    from shopfloor.workflows.activity_catalogue import GITHUB_PERMISSION, call
    from shopfloor.workflows.call_waits import CallWaits
    from shopfloor.workflows.comment_replies import reply_on_github

PERMISSION_TTL = timedelta(minutes=5)
WRITE_LEVELS = frozenset({"write", "maintain", "admin"})
# Comment commands that act on the pipeline and its running agent (workflows/pipeline_controls.py).
CONTROL_COMMANDS = frozenset({"steer", "raise-limits", "pause", "resume", "cancel"})
# Histories recorded before those reached the running agent and got a reply.
COMMENT_CONTROLS_PATCH = "comment-controls-reach-agent"
# Histories recorded before commands were bound to the run's own pull request.
OWN_PULL_REQUEST_PATCH = "commands-from-own-pull-request"
COMMANDS_KEPT = 50
COMMENTS_KEPT = 200


def _marker_kind(e: RepoEvent) -> str:
    if e.review_id is not None:  # a review and its line comments get one reply between them
        return f"refused-review-{e.review_id}"
    return f"refused-{reply_ref(e.comment_id, e.delivery_id)}"


class CommandHandling(CallWaits):
    carry: InboxCarry
    repo: str
    number: int

    def own_pull_request(self) -> int | None:
        """The pull request this run opened, whose comments command it too (None: none)."""
        return None

    async def handle_command(self, e: RepoEvent) -> str:
        """Check and record `e.command`; returns a note for the event log."""
        if e.command is None:
            raise ApplicationError(
                "an event without a command was handled as a command",
                type=failure_types.INCONSISTENT_WORKFLOW_STATE,
                non_retryable=True,
            )
        c, name = self.carry, e.command.name
        if (
            e.number is not None
            and e.number not in (self.number, self.own_pull_request())
            and workflow.patched(OWN_PULL_REQUEST_PATCH)
        ):
            workflow.logger.warning("/shopfloor %s on #%s ignored: not this run's pull request", name, e.number)
            return f"ignored: command from #{e.number}, which is not this run's pull request"
        if e.comment_id is not None:
            if e.comment_id in c.handled_comments:  # an edit of the comment must not act again
                return f"ignored: comment {e.comment_id} was handled already"
            c.handled_comments.append(e.comment_id)
            del c.handled_comments[:-COMMENTS_KEPT]
        permission = await self.permission_of(e.sender)
        record = CommandRecord(
            name=name,
            sender=e.sender,
            comment_id=e.comment_id,
            delivery_id=e.delivery_id,
            permission=permission,
            text=e.text,
            at=workflow.now(),
        )
        if permission not in WRITE_LEVELS:
            record.reason = (
                "could not check the sender's permission" if permission == "unknown" else "needs write access"
            )
            record.replied = await self._refuse(e, permission)
            self._keep(record)
            return f"command {name} refused ({permission})"
        record.accepted = True
        self._keep(record)
        if name in ("approve-call", "reject-call"):  # an answer for a waiting tool call, not work to start
            return await self.answer_call(e, approved=name == "approve-call")
        if name in CONTROL_COMMANDS and workflow.patched(COMMENT_CONTROLS_PATCH):
            return await self.control_command(e)
        if name == "stop":
            c.state, c.stopped_by = "stopped", e.sender
        elif name == "pause":
            c.paused = True
        elif name == "resume":
            c.paused = False
        elif c.trigger_text is None and e.text is not None:
            # A maintainer's command on an issue shopfloor never saw opened: that comment is the trigger.
            c.trigger_text, c.trigger_title, c.trigger_delivery_id = e.text, e.title, e.delivery_id
        return f"command {name} accepted"

    async def control_command(self, e: RepoEvent) -> str:
        """Apply an accepted control command (PipelineControls does, for an issue's or a PR's run)."""
        return f"command {e.command.name if e.command else ''} accepted"

    def _keep(self, record: CommandRecord) -> None:
        self.carry.commands.append(record)
        del self.carry.commands[:-COMMANDS_KEPT]

    async def permission_of(self, login: str) -> str:
        """The sender's permission on the repo: from the cache while fresh, else from GitHub."""
        now = workflow.now().timestamp()
        ttl = PERMISSION_TTL.total_seconds()
        cache = self.carry.permissions
        for key in [k for k, v in cache.items() if now - v.checked_at >= ttl]:
            del cache[key]  # expired entries go, so the cache stays small
        key = f"{self.repo}:{login.lower()}"
        if key in cache:
            return cache[key].permission
        try:
            out = await call(
                GITHUB_PERMISSION,
                PermissionInput(repo=self.repo, login=login),
                summary=f"permission of {safe_login(login)} on {self.repo}",
            )
        except ActivityError:
            return "unknown"  # not cached: the next comment asks again
        cache[key] = CachedPermission(permission=out.permission, checked_at=workflow.now().timestamp())
        return out.permission

    async def _refuse(self, e: RepoEvent, permission: str, feedback: str | None = None) -> bool:
        """Reply once that `e` was not acted on: its command, or (`feedback` names it) people's
        feedback on the pull request, which is an instruction only from a writer."""
        if e.command is None and feedback is None:
            raise ApplicationError(
                "an event without a command was refused as a command",
                type=failure_types.INCONSISTENT_WORKFLOW_STATE,
                non_retryable=True,
            )
        who = safe_login(e.sender)
        if feedback is not None:
            what = f"shopfloor did not act on {feedback}"
            if permission == "unknown":
                body = f"@{who} {what}: it could not check your access to {self.repo}. Try again later."
            else:
                body = (
                    f"@{who} {what}: feedback is an instruction for shopfloor only from people with write "
                    f"access to {self.repo} (you have: {permission}). Ask a maintainer."
                )
            summary = f"refuse feedback from {who}"
        else:
            name = e.command.name if e.command else ""
            cmd = f"`/shopfloor {name}`"
            if permission == "unknown":
                body = (
                    f"@{who} {cmd} was not run: shopfloor could not check your access to {self.repo}. Try again later."
                )
            else:
                body = f"@{who} {cmd} needs write access to {self.repo} (you have: {permission}). Ask a maintainer."
            summary = f"refuse /shopfloor {name} from {who}"
        # The refusal is recorded either way; the reply is a courtesy.
        return await reply_on_github(self.repo, self.number, kind=_marker_kind(e), body=body, summary=summary)
