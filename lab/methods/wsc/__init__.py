r"""Weight Space Consolidation (WSC): replay, plus rank-based resets for plasticity and weight averaging for
stability.

Paper: Cho, Moon, Chunara, Cho & Cha, "Forget Forgetting: Continual Learning in a World of Abundant Memory"
(arXiv 2502.07274, ICLR 2026). Official code: umamicode/weight-space-consolidation (PyCIL-based).

**Idea.** Continual learning has long assumed that exemplar memory is scarce. When it is abundant (hundreds of
exemplars per class) but retraining from scratch is too expensive, plain replay already keeps most of the old tasks,
and the problem turns around: the network, trained mostly on replayed data, is biased toward old tasks and learns the
new one less well (plasticity falls), while what is left of forgetting comes from the drift of the weights. WSC
treats both in weight space, at the cost of replay:

1. **Rank-based reset** (plasticity). After the new task has been trained for a while, score every weight by the
   optimiser's moments, ``s = |m| · v`` (Adam's first and second moment estimates of its gradient). Per tensor keep
   the top 20% as they are; move every other weight halfway back to its value after the previous task:

       mask = top_20%(s),      θ ← where(mask, θ, ½ θ + ½ θ_{t-1}).

   The weights the new task needs keep their new values; the rest stop carrying the drift of this task's early,
   noisy steps and start again from a point the old tasks agree with.

2. **Weight averaging** (stability). From the reset to the end of the task, keep a running mean of the weights
   (SWA, at a constant learning rate) and end the task on it:

       θ̄ ← θ̄ + (θ_k - θ̄) / (n + 1),       θ ← θ̄ at the end of the task.

   The mean lies in a flatter region, which old and new data share better than any single iterate.

**Results** (CIFAR-100, 10 tasks of 10 classes, ResNet-32, class-incremental; final average accuracy at 20 / 80 /
200 / 400 exemplars per class): replay 48.63 / 63.78 / 71.60 / 75.71, WSC 52.16 / 66.89 / 74.49 / 77.71; full
retraining 78.94. Resets alone are about replay; averaging alone is in between; both together are best. Training cost
is about replay's; expansion methods (DER, FOSTER) cost 4-5 times more.

**In this lab.** Split MNIST-1D (five tasks of two classes, class-incremental, one head over the classes seen) with a
small MLP (:class:`lab.core.continual.MLP`); replay buffers holding a share of every past task's data
(:class:`lab.datasets.streams.ReplayBuffer`); replay, reset only, averaging only, WSC, and a second replay run with
another mini-batch order (the control), all with the same optimiser steps per task; full retraining on all data as
the upper reference. At the claim share, WSC's ablations on its own schedule: WSC without the averaging, WSC with the
official code's reset (a no-op, below), and replay with the re-warm alone (a baseline: the headline takes the better
of it and replay on each seed). :mod:`.model` (scores, masks, the ``torch.where`` blend, the running mean, the
``on_step`` hook), :mod:`.train` (one stream of tasks per variant), :mod:`.experiment` (``run``), :mod:`.claims`,
:mod:`.plots`, :mod:`.live` (one accuracy matrix, cached, for the ``forgetting`` dashboard); notebook
``16_wsc.ipynb``.

Differences from the official code: the reset happens at a fixed share of each task's steps (the code waits for the
validation loss to plateau), the scores come from AdamW's own moments (the code keeps separate running means of
``|g|`` and ``g²`` beside SGD), and the blend uses ``torch.where`` (the code's ``param.data[~mask].mul_(...)`` writes
into a copy made by boolean indexing, so its reset changes nothing: the code's WSC is averaging plus SWALR's re-warm
to the initial rate, which the ``wsc_official`` variant runs, measuring the reset's move).
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="Forget Forgetting: Continual Learning in a World of Abundant Memory",
                     paper="arXiv:2502.07274",
                     summary="Replay with large memory, plus rank-based resets of low-importance weights toward the "
                             "previous task (plasticity) and weight averaging (stability), at replay's cost.")

__all__ = ["METHOD"]
