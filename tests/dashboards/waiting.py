"""Waiting for a dashboard's background preparations without a server (the served page polls them periodically)."""

from __future__ import annotations

import time


def preparations(board) -> list:
    """Every preparation of a panel or of a dashboard's panels."""
    panels = board.panels.values() if hasattr(board, "panels") else [board]
    return [prep for panel in panels for prep in panel.preparations.values()]


def settle(board, deadline: float, *names: str) -> None:
    """Poll the board's preparations (those named ``names``, or all) until none works or ``time.time()`` passes
    ``deadline``; a finished one may start again for settings changed meanwhile, and is waited for too."""
    preps = [p for p in preparations(board) if not names or p.name in names]
    while any(p.running for p in preps) and time.time() < deadline:
        time.sleep(0.2)
        for prep in preps:
            prep.poll()
    running = [p.name for p in preps if p.running]
    assert not running, f"still preparing: {running}"


def errors(board) -> list[str]:
    """The errors of the current settings' preparations (empty when none failed)."""
    return [p.error for p in preparations(board) if p.error]
