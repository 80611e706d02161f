"""The PSM claims, each read from the run's Dataset alone.

The duality and resource claims are measured on the trained Transformer-PSM (first seed) over sequences of every
chunk count in ``n_chunks``; their controls are other ways to stream the same model, with no learned part of their
own: a left fold (another bracketing, which must disagree for a non-associative aggregator) and the naive recompute
that keeps every chunk state. The accuracy claims are measured per seed. Their control is the same trained PSM with
its prefix states replaced by the identity; the learned baselines they compare against carry competence checks: each
baseline's accuracy at the training length (in distribution), where the paper's baselines are accurate. The headline
is length generalisation on state tracking: the Transformer-PSM against the strongest baseline of each seed at 4x
the training length; the same comparison on MQAR is a report row (the paper shows length generalisation on S5).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from lab.claims import Claim, Competence, Measurement, Pick, difference, value

#: the baselines of a run (those of them it trained): the claims compare the Transformer-PSM with their best
BASELINES = ("transformer", "lru", "mamba")
#: accuracy at the training length above which a baseline has learned its task (competence)
COMPETENT = 90.0
COMPETENT_SOURCE = ("the paper's baselines are accurate at the training lengths and degrade only past them (S5 "
                    "figure); 90% is our convention for 'learned the task' (parity: chance 50%; MQAR: 1/vocab)")
#: the state task's training regimes in words (the statement; each run's detail gives its lengths and steps)
STATE_REGIMES = ("; regimes: the models of `mixed_models` (the PSM) trained over mixed lengths up to the training "
                 "length (one per batch, from `min_train_length`), the others at the training length; the "
                 "transformer for `transformer_steps`, which it needs to fit the training length")
#: the two tasks in words (detail texts)
TASKS = {"state": "state tracking", "recall": "MQAR"}


def _max_diff(bracketing: str):
    def measure(ds: xr.Dataset) -> Measurement:
        d = ds.stream_diff.sel(psm="psm", bracketing=bracketing)
        n = ds.n_chunks.values
        worst = int(n[int(np.nanargmax(d.values))])
        return Measurement(float(d.max()), f"{bracketing}: largest at n = {worst} chunks (n up to {int(n.max())}; "
                                            f"per n: {', '.join(f'{v:.2g}' for v in d.values)})")

    return measure


def _live_excess(bracketing: str):
    def measure(ds: xr.Dataset) -> Measurement:
        n = ds.n_chunks.values
        live = ds.stream_live.sel(psm="psm", bracketing=bracketing).values
        excess = live - (np.floor(np.log2(n)) + 1)
        held = ", ".join(map(str, live.astype(int)))
        return Measurement(float(excess.max()), f"{bracketing}: most live states {held} at n = "
                                                f"{', '.join(map(str, n))} chunks")

    return measure


def _calls_per_chunk(bracketing: str):
    def measure(ds: xr.Dataset) -> Measurement:
        n = ds.n_chunks.values
        per = ds.stream_calls.sel(psm="psm", bracketing=bracketing).values / n
        return Measurement(float(per.max()), f"{bracketing}: calls per chunk {', '.join(f'{v:.3g}' for v in per)} at "
                                             f"n = {', '.join(map(str, n))}")

    return measure


def _at_training_length(task: str, model: str, label: str) -> Pick:
    """A model's accuracy on ``task`` at the training length (factor 1), per seed."""
    return Pick("accuracy", label, sel={"task": task, "model": model, "factor": 1}, unit="%")


def _regimes(ds: xr.Dataset, task: str) -> str:
    """Each model's training regime on ``task`` (lengths, steps), as the run recorded it ("" in older runs)."""
    text = ds.attrs.get(f"{task}_regime", "")
    return f"; trained: {text}" if text else ""


def _task_note(task: str):
    """Dataset -> the task's data set, the training length and each model's regime (a detail's note)."""
    return lambda ds: f"{ds.attrs[f'{task}_task']}, training length {ds.attrs['train_length']}{_regimes(ds, task)}"


def _gap_to_transformer(task: str, blind: bool = False):
    """Transformer minus PSM (or the state-blind PSM) at the training length, per seed, mean."""
    psm = (Pick("blind_accuracy", "state-blind PSM", sel={"task": task, "factor": 1}, unit="%") if blind
           else _at_training_length(task, "psm", "Transformer-PSM"))
    return difference(_at_training_length(task, "transformer", "transformer"), psm,
                      what=f"{TASKS[task]} at the training length", note=_task_note(task))


def _baselines(ds: xr.Dataset) -> list[str]:
    return [m for m in BASELINES if m in ds.model.values]


def _baselines_note(task: str):
    """Dataset -> which baseline is the strongest on each seed at 4x, and each baseline's mean (a detail's note)."""

    def note(ds: xr.Dataset) -> str:
        base = ds.accuracy_beyond.sel(task=task, factor=4, model=_baselines(ds))  # (model, seed)
        which = [str(base.model.values[i]) for i in base.argmax("model").values]
        means = ", ".join(f"{m} {float(base.sel(model=m).mean()):.1f}%" for m in base.model.values)
        return f"{ds.attrs[f'{task}_task']}; the strongest per seed: {', '.join(which)} ({means}){_regimes(ds, task)}"

    return note


def _beyond(task: str, blind: bool = False):
    """PSM (or the state-blind PSM) minus the strongest baseline of each seed at 4x, on the positions past the
    training length, per seed; the statistic is the worst seed."""
    at_4x = {"task": task, "factor": 4}
    psm = (Pick("blind_accuracy_beyond", "state-blind PSM", sel=at_4x, unit="%") if blind
           else Pick("accuracy_beyond", "Transformer-PSM", sel={**at_4x, "model": "psm"}, unit="%"))
    best = Pick("accuracy_beyond", "strongest baseline", sel={**at_4x, "model": _baselines}, unit="%", reduce="max")
    return difference(psm, best, statistic="min", what=f"{TASKS[task]} at 4x, past the training length",
                      note=_baselines_note(task))


def _in_distribution(task: str, model: str):
    """A baseline's accuracy at the training length, worst seed (its competence)."""
    return value(_at_training_length(task, model, model), statistic="min",
                 what=f"{TASKS[task]} at the training length")


def _competent(task: str, models) -> tuple[Competence, ...]:
    return tuple(Competence(label=f"{m}, accuracy at the training length (worst seed)",
                            measure=_in_distribution(task, m), op=">", threshold=COMPETENT,
                            threshold_source=COMPETENT_SOURCE, unit="%") for m in models)


#: why the MQAR rows are report rows at chunk 1
MQAR_REGIME = ("reported either way: the paper's near-perfect MQAR is at c = 64, where a chunk state holds 64 rows "
               "and the pairs of a sequence fit in a few chunks; at c = 1 (the state-tracking regime, trained"
               " here) every key-value pair must pass through one-row states and the non-associative tree; trained"
               " for `mqar_steps` only (the detail gives each model's steps), a report row, not a verdict")


def _matches(task: str, what: str) -> Claim:
    common = dict(
        name=f"matches_transformer_{task}",
        statement=f"On {what} the Transformer-PSM matches the causal transformer at the training length (transformer "
                  "minus PSM accuracy, mean over seeds)",
        source="paper: Transformer-PSM matches transformer accuracy in distribution (state tracking, MQAR, "
               "WikiText-103 ppl 22.45-24.12 vs GPT-2 22.28)",
        measure=_gap_to_transformer(task),
        op="<=",
        threshold=3.0,
        unit="pt",
    )
    if task == "recall":
        return Claim(**common, threshold_source=MQAR_REGIME, report=True)
    return Claim(
        **common,
        threshold_source="within 3 pt (our convention for 'matches' at this scale)",
        control=_gap_to_transformer(task, blind=True),
        control_label="the same trained PSM with every prefix state replaced by the identity: must fall more than "
                      "3 pt behind",
        competence=_competent(task, ("transformer",)),
    )


def _generalises(task: str, what: str, headline: bool) -> Claim:
    common = dict(
        name=f"generalises_{task}",
        statement=f"On {what} at 4x the training length, the Transformer-PSM beats the strongest baseline of each "
                  "seed (the best of the causal transformer, LRU and Mamba; accuracy past the training length; PSM "
                  "minus that best, worst seed)" + (STATE_REGIMES if task == "state" else ""),
        source="paper Fig. (S5, trained on lengths 4-18): Transformer-PSM (c = 1) accurate to ~160-180 while GPT-2 "
               "and Mamba degrade",
        measure=_beyond(task),
        op=">",
        threshold=3.0,
        unit="pt",
    )
    if not headline:
        return Claim(**common, threshold_source="reported either way: the paper shows length generalisation on S5, "
                                                "not on MQAR; " + MQAR_REGIME.removeprefix("reported either way: "),
                     report=True)
    return Claim(
        **common,
        threshold_source="more than the 3 pt within which two models count as matching (our convention, as in "
                         "matches_transformer_*), on every seed",
        control=_beyond(task, blind=True),
        control_label="the same trained PSM with every prefix state replaced by the identity, in the PSM's place: "
                      "must not beat the strongest baseline by more than 3 pt",
        competence=_competent(task, BASELINES),
        headline=True,
    )


CLAIMS = [
    Claim(
        name="parallel_streaming_agree",
        statement="The binary-counter streaming pass gives the parallel (Blelloch-tree) logits, up to n chunks",
        source="paper: sequential-parallel duality; streaming inference computes the states training used",
        measure=_max_diff("counter"),
        op="<",
        threshold=1e-4,
        threshold_source="the lab's bar: max abs diff < 1e-4 up to 64 chunks (float32)",
        unit="logit",
        control=_max_diff("fold"),
        control_label="streaming with a left fold s_i = Agg(s_{i-1}, x_i): another bracketing of a "
                      "non-associative Agg must disagree",
        control_analytic="the same trained PSM streamed in another order of the same Agg calls: nothing of its own "
                         "is learned",
    ),
    Claim(
        name="live_states_bound",
        statement="Streaming holds at most floor(log2 n) + 1 chunk states (blocks on the counter's stack, as the "
                  "paper counts roots; most held minus the bound, worst n)",
        source="paper: online binary counter with at most ceil(log2(t + 1)) roots; O(log N) memory",
        measure=_live_excess("counter"),
        op="<",
        threshold=1.0,
        threshold_source="the bound itself: an integer excess of 0 (any state over the bound fails)",
        unit="states",
        control=_live_excess("naive"),
        control_label="the naive recompute that keeps every chunk state: its count grows as n",
        control_analytic="a bookkeeping variant of the same stream (every chunk state kept): its count is n by "
                         "construction, nothing learned",
    ),
    Claim(
        name="aggregator_calls_bounded",
        statement="Streaming makes O(1) aggregator calls per chunk, amortised (worst n)",
        source="paper: O(1) amortised Agg calls per chunk (binary increment)",
        measure=_calls_per_chunk("counter"),
        op="<=",
        threshold=2.0,
        threshold_source="binary counter: one merge per chunk amortised plus one prefix fold (kernels.prefix_scan)",
        unit="calls/chunk",
        control=_calls_per_chunk("naive"),
        control_label="the naive recompute of each prefix from every kept state: calls per chunk grow with n",
        control_analytic="a bookkeeping variant of the same stream (each prefix recomputed): its calls follow from "
                         "n, nothing learned",
    ),
    _matches("state", "state tracking"),
    _generalises("state", "state tracking", headline=True),
    _matches("recall", "MQAR"),
    _generalises("recall", "MQAR", headline=False),
]
