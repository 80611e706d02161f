"""The lab's one cache: generated data sets, trained weights (with their curves) and an in-memory memo.

Three calls, all keyed by a content hash of the config that determines what they hold:

* :func:`cached_dataset` (xarray data sets, NetCDF, checksummed: :mod:`lab.cache.datasets`),
* :func:`cached_model` (a trained ``nn.Module`` with its loss curves and metadata) and the lower-level
  :func:`cached_state` (any dict of tensors, arrays, numbers and strings): ``<data>/<folder>/<name>-<key16>.pt``,
  written atomically, read with ``weights_only=True`` (:mod:`lab.cache.weights`),
* :func:`memo`, a thread-safe in-memory cache for a process (dashboards, notebooks): one computation per key even
  when several threads ask at once (:mod:`lab.cache.memory`).

A key holds what decides the result, never how it is made: a dashboard's whole run (:func:`cached_run`) is keyed by
:func:`result_config`, the Config less its threads, device and ``use_cache``, and takes the report's saved run when
it is current (:mod:`lab.cache.runs`). :func:`watch_work` lets a dashboard tell a cache read from work done.

=================  ===============================================================================================
module             role
=================  ===============================================================================================
``keys``           content keys of configs (:func:`config_hash`) and of Datasets (:func:`dataset_checksum`), entry
                   names, the data folder (:func:`data_root`), an entry's file lock (:func:`entry_lock`)
``datasets``       data sets as checksummed NetCDF files, written atomically, validated on load
``weights``        trained weights and other torch state, read with ``weights_only=True``
``memory``         the in-memory :func:`memo`
``runs``           a method's whole run for a dashboard (:func:`cached_run`), the report's saved run reused
``watch``          whether a thread builds or trains (:func:`watch_work`), or only reads caches back
=================  ===============================================================================================
"""

from .datasets import ENGINE, cache_path, cached_dataset, dataset_checksum
from .keys import config_hash, data_root, entry_lock, project_root
from .memory import memo
from .runs import RUN_ONLY, cached_run, result_config, saved_run
from .watch import watch_work, working
from .weights import Trained, cached_model, cached_state, state_digest, state_path

__all__ = [
    "ENGINE",
    "RUN_ONLY",
    "Trained",
    "cache_path",
    "cached_dataset",
    "cached_model",
    "cached_run",
    "cached_state",
    "config_hash",
    "data_root",
    "dataset_checksum",
    "entry_lock",
    "memo",
    "project_root",
    "result_config",
    "saved_run",
    "state_digest",
    "state_path",
    "watch_work",
    "working",
]
