"""Reports: execute every method's notebook with Papermill, export HTML, and write an index of claims tables.

Each notebook runs in its own process with the parameters ``profile`` and ``result_path``; the notebook saves its
results Dataset there, and the index re-checks the claims from that NetCDF alone (no scrapbook). A notebook whose
inputs did not change since its last good run is not executed again: its HTML, NetCDF and index row are reused
(``force=True`` reruns everything). Each method's headline figure (:func:`lab.viz.headline`) is embedded in its index
row as a PNG; the pages open offline, the scripts and styles every page shares written once beside them.

==============  ===================================================================================================
module          role
==============  ===================================================================================================
``build``       :func:`build_report`: run what changed, collect what each notebook left, write the index
``execute``     Papermill in local processes (the cores split between them) or on a Dask cluster
``reuse``       the content hash of a run's inputs (:func:`run_key`) and the stamp of the last good run
``export``      HTML that opens offline (nbconvert template; MathJax, BokehJS and the theme's CSS beside the pages)
``index``       the index page: one line per method, then each method's section (its claims table folded)
``headlines``   the index's tables: each method's line (its central claim, verdict, measured, required, control)
                and its claims table laid out to fit the page
``summary``     the records: :class:`NotebookRun`, :class:`ReportSummary` and its JSON
==============  ===================================================================================================
"""

from .build import build_report
from .execute import connect, kernel_environment, tls_security
from .export import install_mathjax
from .index import render_index
from .reuse import run_key, source_files
from .summary import NotebookRun, ReportSummary

__all__ = [
    "NotebookRun",
    "ReportSummary",
    "build_report",
    "connect",
    "install_mathjax",
    "kernel_environment",
    "render_index",
    "run_key",
    "source_files",
    "tls_security",
]
