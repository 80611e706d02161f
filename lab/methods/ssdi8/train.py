"""SSDi8's data and its only training: a character corpus read from Python's standard-library sources, and a small
Mamba-2 language model trained on it once and cached.

The corpus: every ``.py`` file under ``sysconfig.get_paths()["stdlib"]`` (test suites, ``site-packages`` and
caches left out), sorted by relative path; file ``i`` goes to calibration when ``i % 10 == 7``, to evaluation when
``i % 10 == 9``, otherwise to training, so the three splits never share a file. Characters are their code points
below 128 (anything else becomes 0). The splits are cached with :func:`lab.cache.cached_dataset` (keyed by the
Python version, whose sources they are), the weights with :func:`lab.cache.cached_model` under ``data/ssdi8/``.
"""

from __future__ import annotations

import platform
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import xarray as xr

from lab.cache import Trained, cached_dataset, cached_model, state_path
from lab.core.models import CausalLM
from lab.core.runtime import threads
from lab.core.train import fit, seed_everything
from lab.methods.ssdi8.config import Config

__all__ = ["CORPUS_VERSION", "VOCAB", "WEIGHTS_VERSION", "Corpus", "build_model", "corpus_files", "encode",
           "count_model_losses", "grid_index", "load_corpus", "lm_loss", "train_all", "trained_model", "weights_key",
           "window_files"]

#: bump when the corpus or the training changes for an unchanged config (invalidates the caches)
CORPUS_VERSION = 1
WEIGHTS_VERSION = 1
#: training steps in all under which :func:`train_all` trains here: a worker's start costs about 4 s of CPU, about
#: 25 of quick's steps (ci trains 2 x 12)
SERIAL_BELOW_STEPS = 100
#: characters are code points below 128
VOCAB = 128
#: calibration and evaluation windows are spread over this many times the characters they need (more files)
SPREAD = 16
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}


@dataclass(frozen=True)
class Corpus:
    """The three splits, int64 character ids.

    Attributes:
        train: ``(n_train_chars,)`` a stream (training draws random windows).
        calib: ``(n_calib, seq_len + 1)`` calibration sequences. eval: ``(n_eval, seq_len + 1)`` evaluation ones.
        files: files read per split.
        eval_file: ``(n_eval,)`` the evaluation file (index among those read) in which each evaluation sequence
            starts: sequences from one file share its style, so their losses are not independent (the claims'
            standard errors are clustered by it).
    """

    train: torch.Tensor
    calib: torch.Tensor
    eval: torch.Tensor
    files: dict
    eval_file: np.ndarray


def corpus_files() -> list[Path]:
    """The standard library's ``.py`` files, sorted by relative path (tests and third-party packages left out)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in root.rglob("*.py") if not _SKIP_DIRS & set(p.relative_to(root).parts[:-1])]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def encode(text: str) -> np.ndarray:
    """Character ids: code points below 128, anything else 0."""
    ids = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    return np.where(ids < VOCAB, ids, 0).astype(np.uint8)


def _read(files: list[Path], need: int) -> tuple[np.ndarray, int]:
    parts, have = [], 0
    for k, path in enumerate(files):
        if have >= need:
            return np.concatenate(parts)[:need], k
        ids = encode(path.read_text(encoding="utf-8", errors="replace"))
        parts.append(ids)
        have += len(ids)
    if have < need:
        raise ValueError(f"the standard library holds {have} characters for a split that needs {need}")
    return np.concatenate(parts)[:need], len(files)


def _size(files: list[Path]) -> int:
    """Characters in ``files``."""
    return sum(len(encode(p.read_text(encoding="utf-8", errors="replace"))) for p in files)


def _windows(stream: np.ndarray, n: int, length: int) -> np.ndarray:
    """``n`` evenly spaced, non-overlapping windows of ``length`` from ``stream``."""
    starts = np.linspace(0, len(stream) - length, n).astype(np.int64)
    return np.stack([stream[s: s + length] for s in starts])


def window_files(files: list[Path], n: int, length: int) -> np.ndarray:
    """The file (index in ``files``) in which each of :func:`_windows`' ``n`` windows of ``length`` starts, for the
    stream :func:`_read` makes of ``files`` (all of them read: the first ``files_eval`` of the split)."""
    sizes = np.cumsum([len(encode(p.read_text(encoding="utf-8", errors="replace"))) for p in files])
    stream = min(SPREAD * n * length, int(sizes[-1]))
    starts = np.linspace(0, stream - length, n).astype(np.int64)
    return np.searchsorted(sizes, starts, side="right")


def grid_index(n: int, n_grid: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of ``n_grid`` evenly spaced rows of ``n`` (first and last included) and of the other rows, both
    ascending: the evaluation sequences of the whole grid of settings and the rest."""
    if not 1 <= n_grid <= n:
        raise ValueError(f"n_grid={n_grid} must lie in [1, {n}]")
    grid = np.unique(np.linspace(0, n - 1, n_grid).round().astype(np.int64))
    return grid, np.setdiff1d(np.arange(n), grid)


def load_corpus(cfg: Config) -> Corpus:
    """The config's corpus splits (cached under ``data/``)."""
    L = cfg.seq_len + 1
    key = {"version": CORPUS_VERSION, "python": platform.python_version(), "n_train_chars": cfg.n_train_chars,
           "n_calib": cfg.n_calib, "n_eval": cfg.n_eval, "seq_len": cfg.seq_len}

    def build() -> xr.Dataset:
        files = corpus_files()
        split = {"calib": files[7::10], "eval": files[9::10]}
        split["train"] = [f for i, f in enumerate(files) if i % 10 not in (7, 9)]
        train, n_tr = _read(split["train"], cfg.n_train_chars)
        calib, n_ca = _read(split["calib"], min(SPREAD * cfg.n_calib * L, _size(split["calib"])))
        ev, n_ev = _read(split["eval"], min(SPREAD * cfg.n_eval * L, _size(split["eval"])))
        return xr.Dataset(
            {"train": ("char", train), "calib": (("calib_seq", "pos"), _windows(calib, cfg.n_calib, L)),
             "eval": (("eval_seq", "pos"), _windows(ev, cfg.n_eval, L))},
            attrs={"files_train": n_tr, "files_calib": n_ca, "files_eval": n_ev})

    if cfg.use_cache:
        ds = cached_dataset("ssdi8-corpus", key, build)
    else:
        ds = build()
    t = {k: torch.as_tensor(ds[k].values.astype(np.int64)) for k in ("train", "calib", "eval")}
    files = {k: int(ds.attrs[f"files_{k}"]) for k in ("train", "calib", "eval")}
    ev_files = window_files(corpus_files()[9::10][: files["eval"]], cfg.n_eval, L)
    return Corpus(t["train"], t["calib"], t["eval"], files, ev_files)


def count_model_losses(corpus: Corpus) -> tuple[float, float]:
    """The next-character loss (nats, mean over the evaluation positions that the language model is scored on) of
    two count models of the training split, add-one smoothed: unigram (character frequencies) and bigram (the
    previous character only). A language model that learned its corpus beats the bigram."""
    train, ev = corpus.train.numpy(), corpus.eval.numpy()
    uni = np.bincount(train, minlength=VOCAB) + 1.0
    big = np.ones((VOCAB, VOCAB))
    np.add.at(big, (train[:-1], train[1:]), 1.0)
    prev, nxt = ev[:, :-1].ravel(), ev[:, 1:].ravel()  # (n_eval * seq_len,)
    unigram = -np.log(uni[nxt] / uni.sum()).mean()
    bigram = -np.log(big[prev, nxt] / big[prev].sum(1)).mean()
    return float(unigram), float(bigram)


def build_model(cfg: Config) -> CausalLM:
    """A freshly initialised Mamba-2 language model (torch's global generator: seed it first).

    The tied embedding starts at standard deviation 0.1 (not 1) so that the first logits are of order one.
    """
    model = CausalLM(VOCAB, kind="mamba2", d_model=cfg.d_model, n_layers=cfg.n_layers, d_state=cfg.d_state,
                     mixer_kwargs={"headdim": cfg.headdim, "chunk_size": cfg.chunk_size,
                                   "ngroups": cfg.ngroups})
    torch.nn.init.normal_(model.embedding.weight, std=0.1)
    return model


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-character cross-entropy (nats): ``logits`` ``(b, L, V)``, ``targets`` ``(b, L)``."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def trained_model(cfg: Config, corpus: Corpus | None = None, *, progress: bool = True,
                  callback: Callable[[int, int], None] | None = None) -> Trained:
    """The trained language model: from the weight cache (``data/ssdi8/``) or trained now and cached.

    Arguments:
        callback: ``callback(step, total)`` after each training step (a dashboard's progress bar).
    Returns:
        :class:`lab.cache.Trained`, ``meta["train_time_s"]`` and ``meta["final_loss"]`` from the training.
    """
    corpus = corpus or load_corpus(cfg)
    stream, L, B = corpus.train, cfg.seq_len + 1, cfg.batch_size

    def train(model):
        gen = torch.Generator().manual_seed(cfg.seed)
        offsets = torch.arange(L)

        def sample(step):
            starts = torch.randint(0, len(stream) - L, (B,), generator=gen)
            window = stream[starts[:, None] + offsets]  # (B, L)
            return window[:, :-1], window[:, 1:]

        res = fit(model, sample, loss=lambda m, batch: lm_loss(m(batch[0]), batch[1]), steps=cfg.train_steps,
                  lr=cfg.lr, weight_decay=cfg.weight_decay, seed=cfg.seed, progress=progress,
                  desc="train Mamba-2 LM", device=cfg.device,
                  callback=None if callback is None else (lambda s, total, _l: callback(s, total)))
        tail = res.loss[-max(1, len(res.loss) // 10):]
        return {"curves": {"loss": res.loss},
                "meta": {"train_time_s": res.wall_time_s, "final_loss": float(np.mean(tail))}}

    with threads(cfg.threads):
        seed_everything(cfg.seed)
        return cached_model("ssdi8", "mamba2-lm", weights_key(cfg), lambda: build_model(cfg), train,
                            use_cache=cfg.use_cache)


def weights_key(cfg: Config) -> dict:
    """The weight cache's key of ``cfg``'s language model (the training fields and the format versions)."""
    return cfg.training_key(version=WEIGHTS_VERSION, corpus=CORPUS_VERSION, python=platform.python_version())


def _train_job(cfg: Config) -> dict:
    """One training of :func:`train_all` (in a worker process): the weights go to the cache; returns their meta."""
    return trained_model(cfg, progress=False).meta


def train_all(cfg: Config, progress: bool = True) -> list:
    """Train the language models of seeds ``cfg.seed ... cfg.seed + n_seeds - 1`` whose weights are not cached yet,
    side by side in worker processes (:func:`lab.core.parallel.run_jobs`: ``LAB_WORKERS`` or the cores,
    ``cfg.threads`` threads each); :func:`trained_model` then loads each from the cache, the same weights bit for bit
    (each training seeds itself). Below :data:`SERIAL_BELOW_STEPS` training steps in all (ci) it trains here;
    without the cache it does nothing (the run trains as it reads).

    Returns:
        the :class:`lab.core.parallel.JobResult` of each seed.
    """
    from lab.core.parallel import Job, run_jobs

    if not cfg.use_cache:
        return []
    seeds = [replace(cfg, seed=cfg.seed + k) for k in range(cfg.n_seeds)]
    jobs = [Job(f"Mamba-2 LM seed {c.seed}", _train_job, (c,), cost=c.train_steps,
                cached=state_path("ssdi8", "mamba2-lm", weights_key(c)).exists()) for c in seeds]
    small = sum(job.cost for job in jobs if not job.cached) < SERIAL_BELOW_STEPS
    return run_jobs(jobs, workers=1 if small else None, threads_per_worker=cfg.threads, progress=progress,
                    desc="ssdi8 trainings")
