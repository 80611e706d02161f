"""recurrent-lab: ICLR 2026 papers on recurrence, memory and dynamics, runnable on a laptop.

Quick use::

    import lab
    data, claims = lab.run("dam", profile="quick", n=3, N=512)
    claims            # the claims table
    lab.save(data, "dam.nc"); lab.check("dam.nc")
"""

from lab.api import RunResult, check, config_of, load, run, save
from lab.core.runtime import setup_process
from lab.notebooks import notebook_overrides
from lab.registry import get as method
from lab.registry import methods

__version__ = "0.1.0"
__all__ = [
    "RunResult",
    "check",
    "config_of",
    "load",
    "method",
    "methods",
    "notebook_overrides",
    "run",
    "save",
    "setup_process",
]
