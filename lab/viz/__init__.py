"""The shared plot style (:mod:`lab.viz.style`) for notebooks and dashboards.

Each method's own HoloViews builders live in ``lab/methods/<slug>/plots.py``.
"""
