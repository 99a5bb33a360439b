"""An eval run's report: results.json (everything measured), report.md (per model, then per
task, side by side when several models ran) and plot.png (resolve rate against cost per model)."""

from __future__ import annotations

from pathlib import Path

from shopfloor.evals.scoring import ModelSummary, summarize
from shopfloor.models.eval_run import CATEGORIES, EvalResults, ReportOutput


def _money(value: float | None) -> str:
    return "–" if value is None else f"${value:.4f}"


def markdown(results: EvalResults, plot_note: str = "") -> str:
    summaries = [summarize(m, results.outcomes) for m in results.models]
    lines = [
        f"# shopfloor eval {results.run_id}",
        "",
        f"Suite `{results.suite}`, {len({o.instance_id for o in results.outcomes})} task(s), "
        f"{results.started_at:%Y-%m-%d %H:%M} – {results.ended_at:%H:%M} UTC.",
        "",
        "| Model | Resolved | Rate (95% CI) | Cost | Cost per resolved | Median steps | "
        + " | ".join(c.replace("_", " ") for c in CATEGORIES)
        + " |",
        "|---|---:|---|---:|---:|---:|" + "---:|" * len(CATEGORIES),
    ]
    for s in summaries:
        lo, hi = s.interval
        lines.append(
            f"| `{s.model}` | {s.resolved}/{s.tasks} | {s.resolve_rate:.0%} ({lo:.0%}–{hi:.0%}) | {_money(s.cost_usd)} | "
            f"{_money(s.cost_per_resolved)} | {s.median_steps:g} | "
            + " | ".join(str(s.categories[c]) for c in CATEGORIES)
            + " |"
        )
    lines += ["", "## Tasks", "", "| Task | Model | Outcome | Steps | Tokens | Cost | Wall | Why | Agent run |"]
    lines.append("|---|---|---|---:|---:|---:|---:|---|---|")
    for o in sorted(results.outcomes, key=lambda o: (o.instance_id, o.model)):
        why = o.detail.replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(
            f"| {o.instance_id} | `{o.model}` | {o.category.replace('_', ' ')} | {o.steps} | {o.tokens} | "
            f"{_money(o.cost_usd)} | {o.wall_s:.0f}s | {why} | `{o.agent_run_id}` |"
        )
    lines += ["", "`shopfloor transcript <agent run>` shows what an agent did."]
    factory = [o for o in results.outcomes if o.factory_run_id]
    if factory:  # --agents factory: where each task's whole run and its pull request are
        lines += ["", "## Factory runs", "", "| Task | Model | Issue run | Pull request |", "|---|---|---|---|"]
        for o in sorted(factory, key=lambda o: (o.instance_id, o.model)):
            lines.append(f"| {o.instance_id} | `{o.model}` | `{o.factory_run_id}` | {o.pr_url or 'none'} |")
    if plot_note:
        lines += ["", plot_note]
    return "\n".join(lines) + "\n"


def plot(summaries: list[ModelSummary], dest: Path) -> None:
    """Resolve rate (with its interval) against cost per resolved task, one point per model."""
    import matplotlib  # noqa: PLC0415 - only a report draws; the backend is chosen before pyplot loads

    matplotlib.use("Agg")
    from matplotlib import pyplot  # noqa: PLC0415

    fig, ax = pyplot.subplots(figsize=(6.4, 4.2), dpi=100)
    try:
        for s in summaries:
            x = s.cost_usd / s.tasks if s.cost_per_resolved is None and s.tasks else (s.cost_per_resolved or 0.0)
            lo, hi = s.interval
            ax.errorbar([x], [s.resolve_rate], yerr=[[s.resolve_rate - lo], [hi - s.resolve_rate]], fmt="o", capsize=4)
            ax.annotate(s.model, (x, s.resolve_rate), textcoords="offset points", xytext=(6, 6), fontsize=8)
        ax.set_xlabel("cost per resolved task (USD; per task when none resolved)")
        ax.set_ylabel("resolve rate (95% interval)")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(dest, format="png")
    finally:
        pyplot.close(fig)


def write_report(results: EvalResults, folder: Path) -> ReportOutput:
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "results.json"
    data.write_text(results.model_dump_json(indent=1) + "\n")
    png: Path | None = folder / "plot.png"
    note = ""
    try:
        plot([summarize(m, results.outcomes) for m in results.models], folder / "plot.png")
    except (ImportError, OSError, ValueError) as exc:
        png, note = None, f"No plot: {exc}."
    md = folder / "report.md"
    md.write_text(markdown(results, note))
    return ReportOutput(results=str(data), markdown=str(md), plot=str(png) if png else None)
