"""Results: a method's variables declared once (:mod:`lab.results.schema`) and stored as NetCDF with provenance
(:mod:`lab.results.store`).

Conventions for every method's Dataset:

- named dimensions (``alpha``, ``m0``, ``trial``, ``step``, ``K``, ``seed``, ...) with coordinates;
- every variable has ``long_name`` (a description) and ``units`` attrs (``"1"`` for dimensionless), declared once in
  the method's :class:`Schema`;
- the Dataset's attrs carry the provenance added by :func:`attach_provenance`: ``method``, ``profile``, ``config``
  (JSON), ``lab_version``, ``versions`` (JSON), ``git_revision``, ``device``, ``wall_time_s``, ``created``,
  ``hostname``;
- :func:`save` stores a content digest that :func:`load` checks (``load(path, expect={...})`` also checks that the
  file is the one the caller meant).
"""

from lab.results.schema import Coord, Results, Schema, Var
from lab.results.store import (
    DIGEST_ATTR,
    NETCDF_ENGINE,
    attach_provenance,
    config_of,
    content_digest,
    device_description,
    git_revision,
    lab_version,
    library_versions,
    load,
    save,
)

__all__ = [
    "DIGEST_ATTR",
    "NETCDF_ENGINE",
    "Coord",
    "Results",
    "Schema",
    "Var",
    "attach_provenance",
    "config_of",
    "content_digest",
    "device_description",
    "git_revision",
    "lab_version",
    "library_versions",
    "load",
    "save",
]
