"""HoloViews plot builders shared by the notebooks and the dashboards (one module per method)."""
