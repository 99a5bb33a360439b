"""What a worker's activities count for Prometheus: agent steps, model calls (latency, tokens,
cost), tool calls by outcome and sandbox kills, in one registry per process that the worker's
`/metrics` serves (shopfloor/worker_metrics.py).

One registry for the process, not prometheus_client's global one: the activities of every worker
in the process count here (a process is what Prometheus scrapes), and nothing an imported
library registers globally leaks into the page.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from shopfloor.models.transcript import Usage

REGISTRY = CollectorRegistry(auto_describe=True)

AGENT_STEPS = Counter(
    "shopfloor_agent_steps",
    "Agent steps (model_step activities) completed, by agent, model and repository.",
    ["agent", "model", "repo"],
    registry=REGISTRY,
)
MODEL_CALLS = Counter(
    "shopfloor_model_calls",
    "Model calls by model, repository, purpose (step | compaction) and outcome (ok | error).",
    ["model", "repo", "purpose", "outcome"],
    registry=REGISTRY,
)
MODEL_LATENCY = Histogram(
    "shopfloor_model_call_seconds",
    "Time a model call took, answer or failure, by model and repository.",
    ["model", "repo"],
    # Model calls take seconds to minutes, not the default buckets' milliseconds.
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
    registry=REGISTRY,
)
MODEL_TOKENS = Counter(
    "shopfloor_model_tokens",
    "Tokens the providers reported, by model, repository and kind (input | output).",
    ["model", "repo", "kind"],
    registry=REGISTRY,
)
MODEL_COST = Counter(
    "shopfloor_model_cost_usd",
    "What the model calls cost in USD at the worker's price table (unpriced models count nothing).",
    ["model", "repo"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "shopfloor_tool_calls",
    "Tool calls by tool, repository and outcome (ok | error | denied: refused by the permission judge).",
    ["tool", "repo", "outcome"],
    registry=REGISTRY,
)
SANDBOX_KILLS = Counter(
    "shopfloor_sandbox_kills",
    "Sandboxed commands killed, by reason (timeout | limit: memory, processes, disk, CPU).",
    ["reason"],
    registry=REGISTRY,
)


def count_model_call(
    model: str, repo: str, purpose: str, seconds: float, usage: Usage | None, cost_usd: float | None
) -> None:
    """One model call: ok with its usage (and cost when priced), or failed (usage None)."""
    MODEL_CALLS.labels(model=model, repo=repo, purpose=purpose, outcome="error" if usage is None else "ok").inc()
    MODEL_LATENCY.labels(model=model, repo=repo).observe(max(seconds, 0.0))
    if usage is None:
        return
    MODEL_TOKENS.labels(model=model, repo=repo, kind="input").inc(usage.input_tokens)
    MODEL_TOKENS.labels(model=model, repo=repo, kind="output").inc(usage.output_tokens)
    if cost_usd:
        MODEL_COST.labels(model=model, repo=repo).inc(cost_usd)


def count_tool_call(tool: str, repo: str, outcome: str) -> None:
    TOOL_CALLS.labels(tool=tool, repo=repo, outcome=outcome).inc()


def count_sandbox_kill(timed_out: bool) -> None:
    SANDBOX_KILLS.labels(reason="timeout" if timed_out else "limit").inc()
