"""The process-wide generators' lock, below every package of the lab (datasets and core both take it).

:data:`GLOBAL_RNG_LOCK` is held by whatever seeds or draws from the process-wide NumPy and Python generators
(:func:`lab.core.train.seed_everything`; mnist1d's generator, which seeds them itself), so that a dashboard's
background job reseeding them cannot land in the middle of another thread's draws. Re-entrant.
"""

from __future__ import annotations

import threading

__all__ = ["GLOBAL_RNG_LOCK"]

GLOBAL_RNG_LOCK = threading.RLock()
