"""A plain page layout shared by the dashboards: works offline (no template fonts or CDN assets)."""

from __future__ import annotations

from collections.abc import Sequence

import panel as pn

HEADER_STYLE = {"background": "#1f5fa8", "color": "white", "padding": "4px 16px", "border-radius": "4px"}


def dashboard_layout(title: str, *, sidebar: Sequence, main: Sequence) -> pn.Column:
    """Title bar, a fixed-width sidebar of widgets and a main column of views."""
    header = pn.pane.HTML(f"<h2 style='margin:6px 0'>{title}</h2>", styles=HEADER_STYLE,
                          sizing_mode="stretch_width")
    side = pn.Column(*sidebar, width=320)
    body = pn.Column(*main, sizing_mode="stretch_width")
    return pn.Column(header, pn.Row(side, body, sizing_mode="stretch_width"), sizing_mode="stretch_width")


class BackgroundJob:
    """Slow first-use work (training a model) in a thread, with a progress bar and a status line in the page.

    ``start(work, ...)`` runs ``work(report)`` in a daemon thread; ``report(done, total=None, **extra)`` updates the
    progress from there. A periodic callback on the server refreshes the bar and the status (``describe(info)``)
    and, when the thread ends, calls ``on_done()`` or shows the error. Place ``job.status`` and ``job.progress`` in
    the layout.
    """

    def __init__(self, period_ms: int = 250):
        self.progress = pn.indicators.Progress(value=0, max=100, width=300, visible=False)
        self.status = pn.pane.Markdown("")
        self.info: dict[str, float] = {}
        self.error = ""
        self._period = period_ms
        self._thread = None
        self._poller = None
        self._describe = None
        self._on_done = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def clear(self) -> None:
        """Hide the bar and the status (the work's result is available)."""
        self.progress.visible = False
        self.status.object = ""

    def start(self, work, *, total: float, message: str, describe, on_done, name: str = "lab-job") -> None:
        import threading

        self.info = {"done": 0.0, "total": float(total)}
        self.error = ""
        self.progress.max, self.progress.value, self.progress.visible = max(1, int(total)), 0, True
        self.status.object = message
        self._describe, self._on_done = describe, on_done

        def report(done, total=None, **extra):
            self.info.update(done=float(done), **extra)
            if total is not None:
                self.info["total"] = float(total)

        def run():
            try:
                work(report)
            except Exception as exc:  # noqa: BLE001 - shown in the page
                self.error = f"{name} failed: {type(exc).__name__}: {exc}"

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()
        if self._poller is None:
            self._poller = pn.state.add_periodic_callback(self._poll, period=self._period)

    def _poll(self) -> None:
        info = self.info
        self.progress.max = max(1, int(info.get("total", 1)))
        self.progress.value = min(int(info.get("done", 0)), self.progress.max)
        if info.get("done") and self._describe is not None:
            self.status.object = self._describe(info)
        if self._thread is not None and not self._thread.is_alive():
            self._thread = None
            if self._poller is not None:
                self._poller.stop()
                self._poller = None
            if self.error:
                self.status.object = f"**{self.error}**"
                self.progress.visible = False
                return
            if self._on_done is not None:
                self._on_done()
