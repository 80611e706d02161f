"""What the ``reasoning`` dashboard (and a notebook) calls besides ``run``: one closed-loop episode step by step.

:func:`trained_model` is a profile's trained model (:func:`lab.methods.tool_ssm.train.trained`: on disk under
``<data>/tool_ssm/`` and in memory); :func:`episode` runs it on one random problem of a chosen length with and
without the tool and returns every token, every command's effect on the tape and where each model first goes wrong.
"""

from __future__ import annotations

from lab.cache import memo
from lab.checks import check_choice, check_int
from lab.methods.tool_ssm import env as E
from lab.methods.tool_ssm.config import KINDS, TASKS, Config
from lab.methods.tool_ssm.model import rollout
from lab.methods.tool_ssm.train import trained

__all__ = ["episode", "trained_model"]


@memo(maxsize=16)
def trained_model(task: str, kind: str, regime: str, cfg: Config, root: str | None = None):
    """The model ``kind`` trained on ``task`` in ``regime`` with ``cfg``'s settings and seed (memory, disk or now)."""
    check_choice("task", task, TASKS)
    check_choice("model", kind, KINDS)
    check_choice("regime", regime, E.REGIMES)
    return trained(cfg, task, kind, regime, cfg.seed, root=root).model


def _record(ep) -> dict:
    """The steps of one episode: per token its name and writer, and the tape after it."""
    steps, log = [], iter(ep.tool.log)
    heads, out = {"a": 0, "b": 0}, []
    for tok, src in zip(ep.tokens, ep.source):
        if src == "model":
            entry = next(log)
            heads, out = {"a": entry["a"], "b": entry["b"]}, entry["out"]
        steps.append({"token": E.NAMES[tok], "source": src, "error": tok == E.OBS_ERR, "a": heads["a"],
                      "b": heads["b"], "out": list(out)})
    wrong = next((i for i, d in enumerate(ep.expected) if i >= len(ep.tool.out) or ep.tool.out[i] != d), None)
    return {"steps": steps, "out": list(ep.tool.out), "correct": ep.correct, "first_wrong_digit": wrong,
            "errors": ep.tool.errors, "finished": ep.tool.done,
            "prompt_length": sum(s == "question" for s in ep.source)}


@memo(maxsize=64)
def episode(task: str = "add", length: int = 20, model: str = "mamba", seed: int = 0, profile: str = "quick",
            problem: int = 0, root: str | None = None) -> dict:
    """One problem of ``length`` digits solved closed loop by ``model`` with the tool and without it (``cot``).

    Arguments:
        task: ``add`` or ``mul``. length: operand digits (positive). model: one of the Config's kinds.
        seed: the models' seed. profile: whose trained models. problem: which random problem (0, 1, ...).
    Returns:
        ``{"a", "b", "answer", "task", "length", "train_max", "tool": record, "no_tool": record}``; a record has
        ``steps`` (per token: ``token``, ``source`` question/model/tool, ``error``, heads ``a``, ``b``, ``out``),
        ``out``, ``correct``, ``first_wrong_digit`` (None when right), ``errors``, ``finished``.
    """
    check_choice("task", task, TASKS)
    check_int("length", length, 1, 100_000)
    check_int("problem", problem, 0, 1_000_000)
    cfg = Config.from_profile(profile, seed=seed)
    pairs = E.test_problems(task, length, problem + 1, seed + 1_000)
    a, b = pairs[problem]
    out = {"a": a, "b": b, "answer": E.answer(task, a, b), "task": task, "length": length,
           "train_max": cfg.train_max, "model": model}
    for key, regime in (("tool", "tool"), ("no_tool", "cot")):
        net = trained_model(task, model, regime, cfg, root)
        ep, = rollout(net, task, regime, [(a, b)], E.budget(task, regime, length))
        out[key] = _record(ep)
    return out
