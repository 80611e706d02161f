"""DiffusionBlocks' data, training runs (on :func:`lab.core.train.fit`, cached by :func:`lab.cache.cached_model`),
evaluation, and the measured cost of one training step.

* 2-D data (:func:`toy_data`): eight Gaussians on a circle or scikit-learn's two moons, scaled so that each
  coordinate has RMS ``sigma_data`` (the scale is fixed by a reference draw, the same for every seed).
* 2-D runs (:func:`toy_run`): ``e2e`` (one L-layer denoiser over the whole log-normal), ``blocks`` (B denoisers of
  L/B layers on the equal-mass partition, one block per step), ``uniform`` (the same on a partition uniform in
  ln σ), ``blocks_b`` (``blocks`` from another seed: the seed noise), ``small`` (one L/B-layer denoiser over the
  whole range: the per-step memory of a block, without the blocks).
* classifier runs (:func:`cls_run`): ``e2e`` (the L-layer transformer trained with cross-entropy), ``blocks`` (B
  transformers of L/B layers denoising the label embedding), ``small`` (the L/B-layer transformer, cross-entropy).
"""

from __future__ import annotations

import functools
import time

import numpy as np
import torch
import torch.nn.functional as F

from lab.cache import cached_model, state_path
from lab.core.train import fit, seed_everything
from lab.datasets.sequences import SequenceTask, load_sequence_task
from lab.methods.diffusion_blocks import model as M
from lab.methods.diffusion_blocks.config import Config

__all__ = ["CLS_MODELS", "FORMAT", "RERUN_OFFSET", "TOY_MODELS", "classify", "cls_run", "inference_levels",
           "label_embeddings", "load_tokens", "measure_costs", "noised_accuracy", "sample_toy", "toy_data", "toy_run",
           "train_all"]

#: bump when training or a model changes (invalidates cached weights)
FORMAT = 1
#: the same for the classifiers (3: the reference objective, learned shared class embeddings, logits D · E^T)
CLS_FORMAT = 3
#: the same for the blocks' classifier alone (4: unit-norm class embeddings, the reference's)
BLOCKS_FORMAT = 4
#: the second equal-mass run starts from seed + this offset: other initial weights, batches and noise
RERUN_OFFSET = 10_000
TOY_MODELS = ("e2e", "blocks", "uniform", "blocks_b", "small")
CLS_MODELS = ("e2e", "blocks", "small")
#: CPU milliseconds of one training step of one layer at quick's sizes, one thread (2-D MLP denoisers; MNIST-1D
#: transformers), measured on the 2-core machine: the order in which :func:`train_all` starts the jobs
LAYER_STEP_MS = {"toy": 2.6, "cls": 3.4}
#: estimated CPU seconds under which :func:`train_all` trains here: a worker's start costs about 4 s of CPU (ci)
SERIAL_BELOW_S = 20.0
#: tokens per example: digits as 8 rows of 8 pixels, MNIST-1D as 8 pieces of 5 samples
TOKENS = {"digits": (8, 8), "mnist1d": (8, 5)}


# ---------------------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------------------
def _raw_toy(name: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "gaussians8":
        angle = rng.integers(0, 8, n) * (np.pi / 4)
        centres = 2.0 * np.stack([np.cos(angle), np.sin(angle)], 1)
        return centres + 0.15 * rng.standard_normal((n, 2))
    from sklearn.datasets import make_moons

    return make_moons(n, noise=0.05, random_state=int(rng.integers(2**31 - 1)))[0]


@functools.cache
def _toy_scale(name: str) -> tuple[np.ndarray, float]:
    ref = _raw_toy(name, 200_000, 12345)
    return ref.mean(0), float(np.sqrt(((ref - ref.mean(0)) ** 2).mean()))


def toy_data(name: str, n: int, seed: int, sigma_data: float = 0.5) -> torch.Tensor:
    """``n`` points ``(n, 2)`` float32 of the 2-D data set ``name``, each coordinate with RMS about ``sigma_data``."""
    mean, rms = _toy_scale(name)
    return torch.from_numpy((_raw_toy(name, n, seed) - mean) / rms * sigma_data).float()


def load_tokens(cfg: Config) -> SequenceTask:
    """The classification task with inputs cut into tokens: ``x (n, n_tokens, d_token)``."""
    task = load_sequence_task(cfg.dataset).subset(cfg.n_train or None, cfg.n_test or None)
    shape = TOKENS[cfg.dataset]
    return SequenceTask(task.name, task.x_train.reshape(-1, *shape), task.y_train,
                        task.x_test.reshape(-1, *shape), task.y_test, task.n_classes)


def label_embeddings(cfg: Config, model: M.DiffusionBlocks) -> torch.Tensor:
    """The blocks' shared class embeddings, L2-normalised to unit norm: ``(n_classes, d_label)``. Learned (the
    reference implementation): one table shared by every block, trained by each block's cross-entropy; unit norm as
    the reference's ``F.normalize`` (scaling them to per-coordinate RMS ``sigma_data``, norm 2 at d_label 16, let the
    noisy label give itself away up to twice the σ and starved the first block of training where it must read the
    input: MNIST-1D, seed 0, its accuracy at σ_max 50.5% -> 62.2%)."""
    return F.normalize(model.class_emb, dim=-1)


def label_logits(cfg: Config, denoised: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
    """Logits ``(batch, n_classes)`` of a denoised label embedding: its dot products with the (unit-norm) class
    embeddings. The reference reads them with a separate learned head on the denoised embedding; on MNIST-1D (seed
    0, unit norm) a shared linear head gave the same (53.6% against 54.3%), so the logits stay tied to the table."""
    return denoised @ emb.T


# ---------------------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------------------
def _layers(cfg: Config, kind: str) -> int:
    return cfg.n_layers if kind == "e2e" else cfg.block_layers


def _edges(cfg: Config, kind: str) -> np.ndarray:
    return M.partition(cfg.n_blocks, "uniform" if kind == "uniform" else "equal_mass", p_mean=cfg.p_mean,
                       p_std=cfg.p_std, sigma_min=cfg.sigma_min, sigma_max=cfg.sigma_max)


def build_toy(cfg: Config, kind: str, seed: int) -> torch.nn.Module:
    seed_everything(seed)

    def net(layers: int):
        return M.MLPDenoiser(2, cfg.width, layers, cfg.sigma_data)

    if kind in ("e2e", "small"):
        return net(_layers(cfg, kind))
    return M.DiffusionBlocks([net(cfg.block_layers) for _ in range(cfg.n_blocks)], _edges(cfg, kind), cfg.overlap)


def build_cls(cfg: Config, task: SequenceTask, kind: str, seed: int) -> torch.nn.Module:
    seed_everything(seed)
    n_tok, d_tok = task.x_train.shape[1:]

    def net(layers: int, n_classes=None):
        return M.TokenDenoiser(n_tok, d_tok, cfg.d_label, cfg.d_model, layers, cfg.n_heads, cfg.sigma_data,
                               n_classes)

    if kind in ("e2e", "small"):
        return net(_layers(cfg, kind), task.n_classes)
    model = M.DiffusionBlocks([net(cfg.block_layers) for _ in range(cfg.n_blocks)], _edges(cfg, kind), cfg.overlap)
    model.class_emb = torch.nn.Parameter(torch.randn(task.n_classes, cfg.d_label))
    return model


# ---------------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------------
def _noise_batch(cfg: Config, model, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sigma (n,), block ())``: a block drawn uniformly and σ from its range, or σ over the whole range."""
    if isinstance(model, M.DiffusionBlocks):
        b = int(torch.randint(len(model.blocks), (), generator=gen))
        lo, hi = model.training_range(b)
    else:
        b, (lo, hi) = -1, (cfg.sigma_min, cfg.sigma_max)
    return M.sample_sigmas(n, lo, hi, cfg.p_mean, cfg.p_std, gen), torch.tensor(b)


def _denoise_loss(cfg: Config):
    def loss(model, batch):
        *inputs, y, sigma, noise, b = batch
        net = model.blocks[int(b)] if isinstance(model, M.DiffusionBlocks) else model
        return M.edm_loss(net(*inputs, y + sigma[:, None] * noise, sigma), y, sigma, cfg.sigma_data)

    return loss


def _label_loss(cfg: Config):
    """The reference classification objective: block ``b`` denoises the (learned, shared) class embedding and is
    scored by cross-entropy of :func:`label_logits`, weighted by EDM's ``w(σ) = (σ² + σ_d²)/(σ σ_d)²`` over its
    batch mean (the relative weights; Adam would undo a constant scale)."""
    def loss(model, batch):
        x, labels, sigma, noise, b = batch
        emb = label_embeddings(cfg, model)
        denoised = model.blocks[int(b)](x, emb[labels] + sigma[:, None] * noise, sigma)
        w = (sigma ** 2 + cfg.sigma_data ** 2) / (sigma * cfg.sigma_data) ** 2
        ce = F.cross_entropy(label_logits(cfg, denoised, emb), labels, reduction="none")
        return (w / w.mean() * ce).mean()

    return loss


def _train(cfg: Config, model, sampler, loss, steps: int, lr: float, seed: int, progress: bool, desc: str) -> dict:
    if isinstance(model, M.DiffusionBlocks) and cfg.block_budget == "compute":
        steps *= len(model.blocks)
    start = time.process_time()
    res = fit(model, sampler, loss=loss, steps=steps, lr=lr, seed=seed, progress=progress, desc=desc,
              device=cfg.device)
    return {"curves": {"loss": res.loss}, "meta": {"cpu_s": time.process_time() - start, "wall_s": res.wall_time_s}}


def toy_run(cfg: Config, kind: str, seed: int, *, progress: bool = False):
    """Train (or load) one 2-D model of :data:`TOY_MODELS` for data seed ``seed``. Returns
    :class:`lab.cache.Trained` (``meta["cpu_s"]``, ``curves["loss"]``)."""
    train_seed = seed + RERUN_OFFSET if kind == "blocks_b" else seed
    arch = "blocks" if kind == "blocks_b" else kind

    def train(model):
        data = toy_data(cfg.toy, cfg.toy_train, seed, cfg.sigma_data)
        gen = torch.Generator().manual_seed(train_seed)

        def sample(step):
            y = data[torch.randint(len(data), (cfg.toy_batch,), generator=gen)]
            sigma, b = _noise_batch(cfg, model, cfg.toy_batch, gen)
            return y, sigma, torch.randn(y.shape, generator=gen), b

        return _train(cfg, model, sample, _denoise_loss(cfg), cfg.toy_steps, cfg.toy_lr, train_seed, progress,
                      f"2-D {kind} (seed {seed})")

    return cached_model("diffusion_blocks", f"toy-{kind}", _toy_key(cfg, kind, seed),
                        lambda: build_toy(cfg, arch, train_seed), train)


def _toy_key(cfg: Config, kind: str, seed: int) -> dict:
    return {"format": FORMAT, "toy": cfg.toy, "n_layers": cfg.n_layers, "n_blocks": cfg.n_blocks,
            "width": cfg.width, "steps": cfg.toy_steps, "batch": cfg.toy_batch, "lr": cfg.toy_lr, "n": cfg.toy_train,
            "budget": cfg.block_budget,
            "noise": [cfg.p_mean, cfg.p_std, cfg.sigma_min, cfg.sigma_max, cfg.sigma_data, cfg.overlap],
            "kind": kind, "seed": seed}


def cls_run(cfg: Config, task: SequenceTask, kind: str, seed: int, *, progress: bool = False):
    """Train (or load) one classifier of :data:`CLS_MODELS`. Returns :class:`lab.cache.Trained`."""

    def train(model):
        gen = torch.Generator().manual_seed(seed)
        x, labels = task.x_train, task.y_train
        if kind == "blocks":
            def sample(step):
                idx = torch.randint(len(x), (cfg.cls_batch,), generator=gen)
                sigma, b = _noise_batch(cfg, model, cfg.cls_batch, gen)
                return x[idx], labels[idx], sigma, torch.randn(cfg.cls_batch, cfg.d_label, generator=gen), b

            loss = _label_loss(cfg)
        else:
            def sample(step):
                idx = torch.randint(len(x), (cfg.cls_batch,), generator=gen)
                return x[idx], labels[idx]

            def loss(model, batch):
                return F.cross_entropy(model.logits(batch[0]), batch[1])

        return _train(cfg, model, sample, loss, cfg.cls_steps, cfg.cls_lr, seed, progress,
                      f"classifier {kind} (seed {seed})")

    return cached_model("diffusion_blocks", f"cls-{kind}", _cls_key(cfg, kind, seed),
                        lambda: build_cls(cfg, task, kind, seed), train)


def _cls_key(cfg: Config, kind: str, seed: int) -> dict:
    return {"format": BLOCKS_FORMAT if kind == "blocks" else CLS_FORMAT, "dataset": cfg.dataset,
            "n_train": cfg.n_train, "n_layers": cfg.n_layers, "n_blocks": cfg.n_blocks, "d_model": cfg.d_model,
            "n_heads": cfg.n_heads, "d_label": cfg.d_label,
            "steps": cfg.cls_steps, "batch": cfg.cls_batch, "lr": cfg.cls_lr,
            "budget": cfg.block_budget,
            "noise": [cfg.p_mean, cfg.p_std, cfg.sigma_min, cfg.sigma_max, cfg.sigma_data, cfg.overlap],
            "kind": kind, "seed": seed}


def _toy_job(cfg: Config, kind: str, seed: int) -> dict:
    return toy_run(cfg, kind, seed).meta


def _cls_job(cfg: Config, task: SequenceTask, kind: str, seed: int) -> dict:
    return cls_run(cfg, task, kind, seed).meta


def train_all(cfg: Config, task: SequenceTask, progress: bool = True) -> list:
    """Train every 2-D model and classifier of every seed whose weights are not cached yet, side by side in worker
    processes (:func:`lab.core.parallel.run_jobs`: ``LAB_WORKERS`` or the cores, ``cfg.threads`` threads each);
    :func:`toy_run` and :func:`cls_run` then load each from the cache. Each training seeds itself, so its weights are
    those of a training here, bit for bit. Below :data:`SERIAL_BELOW_S` estimated CPU seconds in all (ci) it trains
    here.

    Returns:
        the :class:`lab.core.parallel.JobResult` of each (seed, model), 2-D models first.
    """
    from lab.core.parallel import Job, run_jobs

    def cost(kind: str, task_kind: str, steps: int) -> float:  # estimated CPU seconds: steps x layers x a layer-step
        blocks = kind.startswith("blocks") or kind == "uniform"
        layers = (cfg.n_layers if kind == "e2e" else cfg.block_layers) * (
            cfg.n_blocks if blocks and cfg.block_budget == "compute" else 1)
        return steps * layers * LAYER_STEP_MS[task_kind] / 1000

    jobs = []
    for seed in cfg.seeds:
        jobs += [Job(f"2-D {kind} seed {seed}", _toy_job, (cfg, kind, seed), cost=cost(kind, "toy", cfg.toy_steps),
                     cached=state_path("diffusion_blocks", f"toy-{kind}", _toy_key(cfg, kind, seed)).exists())
                 for kind in TOY_MODELS]
        jobs += [Job(f"classifier {kind} seed {seed}", _cls_job, (cfg, task, kind, seed),
                     cost=cost(kind, "cls", cfg.cls_steps),
                     cached=state_path("diffusion_blocks", f"cls-{kind}", _cls_key(cfg, kind, seed)).exists())
                 for kind in CLS_MODELS]
    small = sum(job.cost for job in jobs if not job.cached) < SERIAL_BELOW_S
    return run_jobs(jobs, workers=1 if small else None, threads_per_worker=cfg.threads, progress=progress,
                    desc="DiffusionBlocks trainings")


# ---------------------------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------------------------
def _levels(cfg: Config, n: int) -> np.ndarray:
    return M.karras_sigmas(n, cfg.sigma_min, cfg.sigma_max)


def sample_toy(cfg: Config, model, n: int, seed: int) -> tuple[torch.Tensor, dict]:
    """``n`` generated points ``(n, 2)`` by Euler sampling, and the states along the way: ``{-1: the start
    σ_max ε, b: after block b's last step}`` (blocks only)."""
    z = cfg.sigma_max * torch.randn(n, 2, generator=torch.Generator().manual_seed(seed + 555))
    owner = model.owner if isinstance(model, M.DiffusionBlocks) else None
    denoise = (lambda zz, s: model(zz, sigma=s)) if owner else model
    out, states = M.euler_sample(denoise, z, _levels(cfg, cfg.sample_steps), owner)
    return out, {-1: z, **states} if owner else {}


def inference_levels(cfg: Config) -> np.ndarray:
    """The noise levels of the reference inference, descending: ``max(B, 2)`` levels evenly spaced in the
    log-normal's CDF from ``σ_max`` to ``σ_min`` (one in each block's range)."""
    return M.partition(max(cfg.n_blocks - 1, 1), p_mean=cfg.p_mean, p_std=cfg.p_std, sigma_min=cfg.sigma_min,
                       sigma_max=cfg.sigma_max)


@torch.no_grad()
def classify(cfg: Config, model, x: torch.Tensor, seed: int, path: list | None = None) -> torch.Tensor:
    """Predicted classes ``(n,)``: the logits' argmax; for blocks the reference inference: from ``z = sqrt(1 +
    σ_max²) ε``, at each of :func:`inference_levels` the block owning it denoises, the class posterior's mean
    embedding ``softmax(logits) E`` takes the Euler step to the next level, and the argmax of the logits at ``σ_min``
    is the class. ``path`` (a list) receives the logits of every level."""
    if not isinstance(model, M.DiffusionBlocks):
        return model.logits(x).argmax(-1)
    emb = label_embeddings(cfg, model)
    levels = inference_levels(cfg).tolist()
    z = (1 + levels[0] ** 2) ** 0.5 * torch.randn(len(x), cfg.d_label,
                                                   generator=torch.Generator().manual_seed(seed + 555))
    for i, sigma in enumerate(levels):
        logits = label_logits(cfg, model.blocks[model.owner(sigma)](x, z, torch.full((len(x),), sigma)), emb)
        if path is not None:
            path.append(logits)
        if i + 1 < len(levels):
            z = z + (levels[i + 1] - sigma) / sigma * (z - logits.softmax(-1) @ emb)
    return logits.argmax(-1)


@torch.no_grad()
def noised_accuracy(cfg: Config, model: M.DiffusionBlocks, x: torch.Tensor, y: torch.Tensor,
                    seed: int) -> np.ndarray:
    """Each inference level's block given what it met in training, the true class's embedding noised at that level:
    test accuracy (%) of its logits with each example's own input and with the inputs shuffled across examples
    (what the block reads from the noisy label alone). Returns ``(levels, 2)``."""
    emb, gen = label_embeddings(cfg, model), torch.Generator().manual_seed(seed + 777)
    perm = torch.randperm(len(x), generator=gen)
    out = []
    for sigma in inference_levels(cfg).tolist():
        z = emb[y] + sigma * torch.randn(len(x), cfg.d_label, generator=gen)
        block, s = model.blocks[model.owner(sigma)], torch.full((len(x),), sigma)
        out.append([100.0 * float((label_logits(cfg, block(xx, z, s), emb).argmax(-1) == y).float().mean())
                    for xx in (x, x[perm])])
    return np.array(out)


def _costs(cfg: Config, e2e, blocks, e2e_loss, inputs: tuple, target: torch.Tensor,
           gen: torch.Generator) -> dict[str, tuple[int, int]]:
    """:func:`model.step_cost` of the end-to-end step, of each block's step (the largest kept) and of every
    block's loss in one step."""
    loss = _denoise_loss(cfg)

    def block_loss(b: int):
        sigma = M.sample_sigmas(len(target), *blocks.training_range(b), cfg.p_mean, cfg.p_std, gen)
        return loss(blocks, (*inputs, target, sigma, torch.randn(target.shape, generator=gen), torch.tensor(b)))

    per_block = [M.step_cost(blocks, lambda b=b: block_loss(b)) for b in range(cfg.n_blocks)]
    return {"e2e": M.step_cost(e2e, e2e_loss), "block": max(per_block),
            "joint": M.step_cost(blocks, lambda: sum(block_loss(b) for b in range(cfg.n_blocks)))}


def measure_costs(cfg: Config, task: SequenceTask) -> dict[str, dict[str, tuple[int, int]]]:
    """One training step of each variant, measured (:func:`model.step_cost`): ``{task: {variant: (saved bytes,
    parameters with gradients)}}`` for ``toy`` and ``classify``; variants ``e2e`` (the L-layer network),
    ``block`` (one block, the largest over blocks) and ``joint`` (the same blocks, every block's loss in one step)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    y = toy_data(cfg.toy, cfg.toy_batch, cfg.seed, cfg.sigma_data)
    e2e = build_toy(cfg, "e2e", cfg.seed)
    sigma = M.sample_sigmas(len(y), cfg.sigma_min, cfg.sigma_max, cfg.p_mean, cfg.p_std, gen)
    noise = torch.randn(y.shape, generator=gen)
    toy = _costs(cfg, e2e, build_toy(cfg, "blocks", cfg.seed),
                 lambda: _denoise_loss(cfg)(e2e, (y, sigma, noise, torch.tensor(-1))), (), y, gen)
    x, labels = task.x_train[: cfg.cls_batch], task.y_train[: cfg.cls_batch]
    clf = build_cls(cfg, task, "e2e", cfg.seed)
    blocks = build_cls(cfg, task, "blocks", cfg.seed)
    classify = _costs(cfg, clf, blocks, lambda: F.cross_entropy(clf.logits(x), labels), (x,),
                      label_embeddings(cfg, blocks)[labels].detach(), gen)
    return {"toy": toy, "classify": classify}
