"""The shared plot style (:mod:`lab.viz.style`) for notebooks and dashboards, and a notebook's headline figure
(:func:`headline`, the small image the report's index shows beside the method's claims).

Each method's own HoloViews builders live in ``lab/methods/<slug>/plots.py``.
"""

from lab.viz.headline import find_headline, headline, headline_png

__all__ = ["find_headline", "headline", "headline_png"]
