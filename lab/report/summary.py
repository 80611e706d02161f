"""What a report holds: one :class:`NotebookRun` per method and the :class:`ReportSummary` of them all (printed by
``lab report``, written as ``summary.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.claims import ClaimsTable

__all__ = ["NotebookRun", "ReportSummary", "summary_json"]


@dataclass
class NotebookRun:
    slug: str
    title: str
    paper: str
    notebook: str
    html: str | None
    seconds: float
    error: str | None = None
    claims: ClaimsTable | None = None
    reused: bool = False
    headline: bytes | None = None

    @property
    def executed(self) -> bool:
        return self.error is None


@dataclass
class ReportSummary:
    profile: str
    index: Path
    runs: list[NotebookRun] = field(default_factory=list)

    @property
    def all_executed(self) -> bool:
        return all(r.executed for r in self.runs)

    @property
    def reused(self) -> list[str]:
        return [r.slug for r in self.runs if r.reused]

    def to_text(self) -> str:
        lines = [f"report ({self.profile} profile)"]
        for r in self.runs:
            if r.executed and r.claims is not None:
                status = f"{'unchanged, reused' if r.reused else 'executed'}, {r.claims.summary()}"
            else:
                status = f"FAILED: {(r.error or '').strip().splitlines()[-1] if r.error else ''}"
            lines.append(f"  {r.slug:<14} {r.seconds:7.1f} s  {status}")
        if self.reused:
            lines.append(f"  ({len(self.reused)} unchanged since their last good run, reused; --force reruns them)")
        return "\n".join(lines)


def summary_json(summary: ReportSummary) -> dict:
    return {
        "profile": summary.profile,
        "methods": [
            {
                "slug": r.slug,
                "seconds": r.seconds,
                "reused": r.reused,
                "error": r.error,
                "headline": f"{r.slug}.headline.png" if r.headline else None,
                "claims": [c.to_dict() for c in r.claims] if r.claims else [],
            }
            for r in summary.runs
        ],
    }
