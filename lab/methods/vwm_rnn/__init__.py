r"""A behaviour-fitting RNN of visual working memory: reverse diffusion as network dynamics makes swap errors.

Paper: Radmard, Bays & Lengyel, "Setting up for failure: automatic discovery of the neural mechanisms of cognitive
errors" (arXiv 2512.04808, ICLR 2026).

**Idea.** Networks fitted to behaviour by regression (MSE) learn the *mean* response: on a trial where the subject
sometimes reports the wrong item (a swap error), the mean lies between the two colours, a response nobody makes.
The paper trains a rate RNN so that its *distribution* of responses matches the behaviour: the network's own
dynamics after the cue run the reverse process of a denoising diffusion model (DDPM) in a fixed 2-D output
subspace, and the responses are samples. Fitted to surrogate behaviour from a swap model whose swap probability
rises as the distractor nears the cued item in the probe dimension, the DDPM-trained RNN makes swap errors;
MSE-trained RNNs do not.

**Task.** Two items, each with a location (the probe feature) and a colour (the report feature), both circular;
stimulus, delay, cue (the cued item's location), delay, response. Surrogate behaviour: report the cued colour,
or with probability ``p(Δ) = 2 p_max / (1 + exp(Δ² / w))`` the distractor's (``Δ`` the items' distance in
location; with ``p_max = 1/2`` the two-item softmax of the upstream example, ``w = 1.5`` [secondary]), plus
report noise: one draw of the two-Gaussian mixture at the colours' points ``R (cos θ, sin θ)`` in R².

**Network.** ``Λ ṙ = -r + F(r, s, η)``, ``F = W φ(r) + U s + b``, private noise ``η`` outside the output plane;
output ``x = W_x r`` with ``W_x`` (2 x n) fixed orthonormal rows, the memory living in the orthogonal complement
[secondary]. Euler step, ``leak = dt / Λ``.

**DDPM loss** (over the ``T`` response steps after the cue and delay) [secondary: the post-cue steps as reverse
steps, teacher forcing, ε-prediction on x only]. Schedule ``β_k``, ``ᾱ_k = Π (1 - β_j)``; a forward chain
``x_k = √(1 - β_k) x_{k-1} + √β_k z`` of the target draw ``x_0`` is forced into the output plane at reverse step
``k``; one network step gives ``μ̂_k = W_x r_{t+1}``, read as

    ε̂_k = (x_k - √α_k μ̂_k) √(1 - ᾱ_k) / β_k,        L = (1/T) Σ_k || ε̂_k - (x_k - √ᾱ_k x_0) / √(1 - ᾱ_k) ||².

Sampling: ``x_T ~ N(0, I)`` in the output plane, then ``x_{k-1} = μ̂_k + √β̃_k z``; the response is the angle of
``x_0``. The MSE baseline is the same network, free running, with ``L = mean_t ||x_t - x_0||²``.

**Bays (2009) mixture**, fitted by EM to the responses ``θ̂``:
``p(θ̂) = w_T vM(θ̂; θ_T, κ) + w_NT vM(θ̂; θ_NT, κ) + w_U / 2π``.

**In this lab.** The items enter as a conjunctive (location x colour) population code with von Mises tuning, the
cue as the cued location's population code (our choice: an RNN of this size learns the binding from it in
minutes; from raw (cos, sin) slots it did not). :mod:`.model` (task, generator, RNN, DDPM loss and sampler, EM),
:mod:`.train` (cached runs on :func:`lab.core.train.fit`), :mod:`.experiment` (``run``), :mod:`.claims`,
:mod:`.plots`; notebook ``13_vwm_rnn.ipynb``. Upstream code puria-radmard/behaviour_ddpm is not used; the facts
marked [secondary] come from research notes on it and on the paper and are unverified here.

**Regime.** At quick (96 units, 2000 steps) the DDPM-trained RNN's samples are too broad (κ about 5 against the
generator's 39) and not bimodal on close trials, so the headline fails there; with 192 units and 20000 steps at
lr 2e-3 (the ``full`` profile, about 10-15 minutes a seed) it matches the generator's swap rate and non-target
mode, with κ 27.5 against 39.4 (3 seeds; every verdict claim holds there). The notebook's regime section lists
every set-up tried.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="Setting up for failure: automatic discovery of the neural mechanisms of cognitive errors",
                     paper="arXiv:2512.04808",
                     summary="A rate RNN whose response dynamics run reverse diffusion in a 2-D output plane, fitted "
                             "to swap-model behaviour: swap errors that an MSE-trained RNN cannot make.")

__all__ = ["METHOD"]
