"""DiffusionBlocks' data, training runs (on :func:`lab.core.train.fit`, cached by :func:`lab.cache.cached_model`),
evaluation, and the measured cost of one training step.

* 2-D data (:func:`toy_data`): eight Gaussians on a circle or scikit-learn's two moons, scaled so that each
  coordinate has RMS ``sigma_data`` (the scale is fixed by a reference draw, the same for every seed).
* 2-D runs (:func:`toy_run`): ``e2e`` (one L-layer denoiser over the whole log-normal), ``blocks`` (B denoisers of
  L/B layers on the equal-mass partition, one block per step), ``uniform`` (the same on a partition uniform in
  ln σ), ``blocks_b`` (``blocks`` from another seed: the seed noise), ``small`` (one L/B-layer denoiser over the
  whole range: the per-step memory of a block, without the blocks).
* classifier runs (:func:`cls_run`): ``e2e`` (the L-layer transformer trained with cross-entropy), ``blocks`` (B
  blocks of L/B transformer layers on one shared stem, denoising the label embedding), ``small`` (the L/B-layer
  transformer, cross-entropy). Equal optimiser budgets (``stem_updates = every_step``): the blocks' stem is updated
  at every step of every block's training (B x cls_steps), each block's layers at cls_steps; ``e2e`` and ``small``
  train B x cls_steps steps with their stem (embedding, positions, class token, norm, head) updated at each and
  their layers at every B-th (:func:`layer_step`): every parameter as many updates x batch as its counterpart.
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
           "label_embeddings", "layer_step", "load_tokens", "matched_schedule", "measure_costs", "noised_accuracy",
           "sample_toy", "toy_data", "toy_run", "train_all"]

#: bump when training or a model changes (invalidates cached weights)
FORMAT = 1
#: the same for the classifiers (5: TokenClassifier, no label dimension in the key; stem_updates = every_step: the
#: blocks' per-parameter update counts, B x the steps with the layers updated at every B-th)
CLS_FORMAT = 5
#: the same for the blocks' classifier alone (6: the reference's shared stem, label embeddings of d_model, the
#: noise-modulated head; the label in the layers' AdaLN condition; cls_partition; the stem updated every step)
BLOCKS_FORMAT = 6
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
    """The blocks' shared class embeddings, L2-normalised to unit norm: ``(n_classes, d_model)``. Learned (the
    reference implementation): one table in the shared stem, trained by every block's cross-entropy; unit norm as
    the reference's ``F.normalize`` (scaling them to per-coordinate RMS ``sigma_data``, norm 2 at 16 dimensions, let
    the noisy label give itself away up to twice the σ: MNIST-1D, seed 0, the first block at σ_max 50.5% -> 62.2%)."""
    return model.stem.embeddings()


# ---------------------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------------------
def _layers(cfg: Config, kind: str) -> int:
    return cfg.n_layers if kind == "e2e" else cfg.block_layers


def _edges(cfg: Config, kind: str) -> np.ndarray:
    part = {"uniform": "uniform", "cls": cfg.cls_partition}.get(kind, "equal_mass")
    return M.partition(cfg.n_blocks, part, p_mean=cfg.p_mean, p_std=cfg.p_std, sigma_min=cfg.sigma_min,
                       sigma_max=cfg.sigma_max)


def build_toy(cfg: Config, kind: str, seed: int) -> torch.nn.Module:
    seed_everything(seed)

    def net(layers: int):
        return M.MLPDenoiser(2, cfg.width, layers, cfg.sigma_data)

    if kind in ("e2e", "small"):
        return net(_layers(cfg, kind))
    return M.DiffusionBlocks([net(cfg.block_layers) for _ in range(cfg.n_blocks)], _edges(cfg, kind), cfg.overlap)


def build_cls(cfg: Config, task: SequenceTask, kind: str, seed: int) -> torch.nn.Module:
    """``e2e`` / ``small``: a :class:`model.TokenClassifier` of L or L/B layers; ``blocks``: B
    :class:`model.StemBlock` s of L/B layers on one :class:`model.TokenStem` (also ``model.stem``), on the
    ``cls_partition``."""
    seed_everything(seed)
    n_tok, d_tok = task.x_train.shape[1:]
    if kind in ("e2e", "small"):
        return M.TokenClassifier(n_tok, d_tok, task.n_classes, cfg.d_model, _layers(cfg, kind), cfg.n_heads)
    stem = M.TokenStem(n_tok, d_tok, task.n_classes, cfg.d_model, cfg.sigma_data, cfg.cls_label)
    model = M.DiffusionBlocks([M.StemBlock(stem, cfg.block_layers, cfg.n_heads) for _ in range(cfg.n_blocks)],
                              _edges(cfg, "cls"), cfg.overlap)
    model.stem = stem
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
    scored by cross-entropy of its logits, weighted by EDM's ``w(σ) = (σ² + σ_d²)/(σ σ_d)²`` over its batch mean
    (the relative weights within a block's batch)."""
    def loss(model, batch):
        x, labels, sigma, noise, b, *stem = batch
        for p in model.stem.parameters():  # off: the stem gets no gradient (and no update) this step
            p.requires_grad_(not stem or bool(stem[0]))
        emb = label_embeddings(cfg, model)
        logits = model.blocks[int(b)](x, emb[labels] + sigma[:, None] * noise, sigma)
        w = (sigma ** 2 + cfg.sigma_data ** 2) / (sigma * cfg.sigma_data) ** 2
        return (w / w.mean() * F.cross_entropy(logits, labels, reduction="none")).mean()

    return loss


def matched_schedule(cfg: Config) -> bool:
    """Whether the end-to-end classifiers train on the blocks' per-parameter update counts (``stem_updates =
    every_step`` under ``block_budget = compute``): B x cls_steps steps, the stem updated at each, the layers at every
    B-th (:func:`layer_step`)."""
    return cfg.block_budget == "compute" and cfg.stem_updates == "every_step"


def layer_step(cfg: Config, step: int) -> bool:
    """Whether the end-to-end classifiers' layers are updated at ``step``: every step, or under
    :func:`matched_schedule` every B-th (cls_steps updates, as each block's layers get)."""
    return not matched_schedule(cfg) or step % cfg.n_blocks == 0


def _train(cfg: Config, model, sampler, loss, steps: int, lr: float, seed: int, progress: bool, desc: str) -> dict:
    if cfg.block_budget == "compute" and (isinstance(model, M.DiffusionBlocks)
                                          or (isinstance(model, M.TokenClassifier) and matched_schedule(cfg))):
        steps *= cfg.n_blocks
    start = time.process_time()
    res = fit(model, sampler, loss=loss, steps=steps, lr=lr, seed=seed, progress=progress, desc=desc,
              device=cfg.device)
    model.requires_grad_(True)  # a loss may have switched the shared stem off for its last step
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
                stem = cfg.stem_updates == "every_step" or step % cfg.n_blocks == 0
                return (x[idx], labels[idx], sigma, torch.randn(cfg.cls_batch, cfg.d_model, generator=gen), b,
                        torch.tensor(stem))

            loss = _label_loss(cfg)
        else:
            def sample(step):
                idx = torch.randint(len(x), (cfg.cls_batch,), generator=gen)
                return x[idx], labels[idx], torch.tensor(layer_step(cfg, step))

            def loss(model, batch):
                for p in model.layers.parameters():  # off: the layers get no gradient (and no update) this step
                    p.requires_grad_(bool(batch[2]))
                return F.cross_entropy(model.logits(batch[0]), batch[1])

        return _train(cfg, model, sample, loss, cfg.cls_steps, cfg.cls_lr, seed, progress,
                      f"classifier {kind} (seed {seed})")

    return cached_model("diffusion_blocks", f"cls-{kind}", _cls_key(cfg, kind, seed),
                        lambda: build_cls(cfg, task, kind, seed), train)


def _cls_key(cfg: Config, kind: str, seed: int) -> dict:
    return {"format": BLOCKS_FORMAT if kind == "blocks" else CLS_FORMAT, "dataset": cfg.dataset,
            "n_train": cfg.n_train, "n_layers": cfg.n_layers, "n_blocks": cfg.n_blocks, "d_model": cfg.d_model,
            "n_heads": cfg.n_heads,
            "steps": cfg.cls_steps, "batch": cfg.cls_batch, "lr": cfg.cls_lr,
            "budget": cfg.block_budget,
            "noise": [cfg.p_mean, cfg.p_std, cfg.sigma_min, cfg.sigma_max, cfg.sigma_data, cfg.overlap],
            "stem": cfg.stem_updates, "kind": kind, "seed": seed,
            **({"partition": cfg.cls_partition, "label": cfg.cls_label} if kind == "blocks" else {})}


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
    """Predicted classes ``(n,)``: the logits' argmax; for blocks the reference inference run as ``n_chains``
    chains: each from its own ``z = sqrt(1 + σ_max²) ε``, at each of :func:`inference_levels` the block owning it
    gives the logits, and the class posterior's mean embedding ``softmax(logits) E`` takes the Euler step to the
    next level; the class probabilities at ``σ_min`` are averaged over the chains and the class is their argmax
    (one chain samples a class from the blocks' predictive distribution; the average estimates that distribution).
    ``path`` (a list) receives the first chain's logits at every level."""
    if not isinstance(model, M.DiffusionBlocks):
        return model.logits(x).argmax(-1)
    emb = label_embeddings(cfg, model)
    levels = inference_levels(cfg).tolist()
    gen = torch.Generator().manual_seed(seed + 555)
    probs = torch.zeros(len(x), len(emb))
    for chain in range(cfg.n_chains):
        z = (1 + levels[0] ** 2) ** 0.5 * torch.randn(len(x), emb.shape[1], generator=gen)
        for i, sigma in enumerate(levels):
            logits = model.blocks[model.owner(sigma)](x, z, torch.full((len(x),), sigma))
            if path is not None and chain == 0:
                path.append(logits)
            if i + 1 < len(levels):
                z = z + (levels[i + 1] - sigma) / sigma * (z - logits.softmax(-1) @ emb)
        probs += logits.softmax(-1)
    return probs.argmax(-1)


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
        z = emb[y] + sigma * torch.randn(len(x), emb.shape[1], generator=gen)
        block, s = model.blocks[model.owner(sigma)], torch.full((len(x),), sigma)
        out.append([100.0 * float((block(xx, z, s).argmax(-1) == y).float().mean())
                    for xx in (x, x[perm])])
    return np.array(out)


def _costs(cfg: Config, e2e, blocks, e2e_loss, loss, batch, n: int) -> dict[str, tuple[int, int]]:
    """:func:`model.step_cost` of the end-to-end step, of each block's step (the largest kept) and of every
    block's loss in one step; ``loss(blocks, batch(b, sigma, gen))`` is block ``b``'s loss on ``n`` examples at
    noise levels ``sigma (n,)`` drawn from its range."""
    gen = torch.Generator().manual_seed(cfg.seed)

    def block_loss(b: int):
        sigma = M.sample_sigmas(n, *blocks.training_range(b), cfg.p_mean, cfg.p_std, gen)
        return loss(blocks, batch(b, sigma, gen))

    per_block = [M.step_cost(blocks, lambda b=b: block_loss(b)) for b in range(cfg.n_blocks)]
    return {"e2e": M.step_cost(e2e, e2e_loss), "block": max(per_block),
            "joint": M.step_cost(blocks, lambda: sum(block_loss(b) for b in range(cfg.n_blocks)))}


def measure_costs(cfg: Config, task: SequenceTask) -> dict[str, dict[str, tuple[int, int]]]:
    """One training step of each variant, measured (:func:`model.step_cost`): ``{task: {variant: (saved bytes,
    parameters with gradients)}}`` for ``toy`` and ``classify``; variants ``e2e`` (the L-layer network),
    ``block`` (one block with the shared stem, the largest over blocks) and ``joint`` (the same blocks, every
    block's loss in one step)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    y = toy_data(cfg.toy, cfg.toy_batch, cfg.seed, cfg.sigma_data)
    e2e = build_toy(cfg, "e2e", cfg.seed)
    sigma = M.sample_sigmas(len(y), cfg.sigma_min, cfg.sigma_max, cfg.p_mean, cfg.p_std, gen)
    noise = torch.randn(y.shape, generator=gen)
    toy = _costs(cfg, e2e, build_toy(cfg, "blocks", cfg.seed),
                 lambda: _denoise_loss(cfg)(e2e, (y, sigma, noise, torch.tensor(-1))), _denoise_loss(cfg),
                 lambda b, s, g: (y, s, torch.randn(y.shape, generator=g), torch.tensor(b)), len(y))
    x, labels = task.x_train[: cfg.cls_batch], task.y_train[: cfg.cls_batch]
    clf = build_cls(cfg, task, "e2e", cfg.seed)
    blocks = build_cls(cfg, task, "blocks", cfg.seed)
    classify = _costs(cfg, clf, blocks, lambda: F.cross_entropy(clf.logits(x), labels), _label_loss(cfg),
                      lambda b, s, g: (x, labels, s, torch.randn(len(x), cfg.d_model, generator=g), torch.tensor(b)),
                      len(x))
    return {"toy": toy, "classify": classify}
