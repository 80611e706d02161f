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


def drain_preparations(seconds: float = 180.0) -> None:
    """Leave no preparation queued or running into the next test: withdraw the server's waiting jobs, ask the
    running one to stop, and wait (up to ``seconds``) until the queue is empty. A page closed or reopened by a test
    leaves its jobs in the process-wide queue, which would make the next test's preparations wait behind them or
    find the queue full."""
    from dashboards.preparation import QUEUE

    QUEUE.cancel_all()
    deadline = time.time() + seconds
    while len(QUEUE) and time.time() < deadline:
        time.sleep(0.1)
        QUEUE.cancel_all()


def errors(board) -> list[str]:
    """The errors of the current settings' preparations (empty when none failed)."""
    return [p.error for p in preparations(board) if p.error]


#: JavaScript: the page's scroll width and the elements (shadow roots included) reaching past the window's right edge
OVERFLOW_JS = """() => {
    const limit = window.innerWidth + 1, wide = [];
    const walk = (root) => {
        for (const el of root.querySelectorAll('*')) {
            const r = el.getBoundingClientRect();
            // Bokeh's renderer layers (a plot's glyphs, clipped to its frame) are left out
            if (r.width > 0 && r.right > limit && !String(el.className).includes('Renderer')) {
                const cls = typeof el.className === 'string' ? el.className.split(' ')[0] : '';
                wide.push(`${el.tagName.toLowerCase()}${cls ? '.' + cls : ''} ends at ${Math.round(r.right)} px`);
            }
            if (el.shadowRoot) walk(el.shadowRoot);
        }
    };
    walk(document);
    return {scrollWidth: document.documentElement.scrollWidth, wide: wide.slice(0, 10)};
}"""


def assert_page_reads(page) -> None:
    """What every dashboard's browser test ends with: no console error, and nothing wider than the window (the
    ``page`` fixture's 1400 x 900), so nothing needs a horizontal scroll."""
    console = [e for e in page.console_errors if "favicon" not in e]
    assert console == [], console
    width = page.viewport_size["width"]
    overflow = page.evaluate(OVERFLOW_JS)
    assert overflow["scrollWidth"] <= width and not overflow["wide"], overflow


def stop_servers(*servers) -> None:
    """Stop test servers started with ``threaded=True``, then clear Panel's server state (each step may find its
    work already done by Panel's own stopper thread: "Thread already stopping")."""
    import panel as pn

    for server in servers:
        try:
            server.stop()
        except RuntimeError:
            pass
    for cleanup in (pn.state.kill_all_servers, pn.state.reset):
        try:
            cleanup()
        except RuntimeError:
            pass
