r"""SSM expressiveness via temporal logic: which languages one SSM layer can recognise, by its gating class and width.

Paper: Alsmann, Noori & Lange, "On the Expressiveness of State Space Models via Temporal Logics" (arXiv 2601.19467,
ICLR 2026). A theory paper without code: every model here is built by hand or trained from scratch.

**The layer.** ``h_t = gate(x_t) ⊙ h_{t-1} + inc(x_t)``, ``h_0 = 0``, read out per position by a ReLU network
``z_t = φ(h_t, x_t)``. The classes differ in the gate: *time-invariant* (``gate = A``, the same at every step, as
S4 / LRU), *diagonal input-gated* with real values in (0, 1) (Mamba-like), and input-gated with negative or complex
values. The paper separates them with logic: fixed-width diagonal input-gated SSMs capture exactly the pure-past
LTL (star-free) properties, such as ``b S a`` ("since the last a, only b's"); time-invariant SSMs cannot express
Since but keep counters modulo m; together they stay within the regular languages in AC0, so gates in (0, 1)
cannot recognise (aa)* (nor parity); every fixed-width SSM recognises only regular languages, while with
log-precision states a counter (``A = 1``) recognises a^n b^n c^n.

**Constructions** (:mod:`.model`), each run in float32 through :func:`kernels.linear_scan` and, where its numbers
are integers, in explicit fixed width through the saturating int8 :func:`kernels.saturating_scan` (float32 over
short words is *not* fixed width: a decaying memory keeps every position apart until it underflows):

* ``since``: gate = [x = b], inc = [x = a], accept iff h > 0 (h is the truth value of ``b S a``).
* ``lti_rotation``: h = ω h + 1 with ω = e^{2πi/m}; for (aa)*, ω = -1 and h alternates 1, 0; accept iff h = 0.
* ``gated_rotation``: gate(a) = ω, inc(a) = 1 - ω, gate(b) = 1: h = 1 - ω^{#a}; counts #a mod m.
* ``counter``: two layers; star-free order flags (#non-a, #c seen), then ``v = Σ`` violations, ``c1 = #a - #b``,
  ``c2 = #b - #c`` with A = 1; accept iff all are 0. int8 saturates at 127: a^128 b^128 c^128 is rejected.
* Controls, the classes the paper says cannot: ``lti_since`` (two memories decaying at λ < 1/2, exact over the
  reals, wrong in float32 once a run of b's underflows them, after a run of 6 b's in int8, 8-bit fixed point);
  ``decay_parity`` (a gate in (0, 1) whose readout decodes the length from ``(1 - g^t)/(1 - g)``: right until float32
  cannot tell the states apart, ~115 steps at g = 0.9; in 8-bit fixed point its states reach a fixed point by
  position 21). The claims read these controls at 8 bits, the same width as the int8 check, so that their failing
  does not hinge on the longest word checked.

**Float32 horizons.** A memory that decays (every time-invariant layer; a trained gate below 1) has a float32
horizon on ``b S a``: the run of b's after which float32 holds the same state after an a as after a c
(:func:`.model.since_horizon`, from the layer's gates and increments). The long-run test puts a run of 1 to 4096
b's after an a or a c and reads the decision at its end: the hand-built since (gate exactly 1 on b) is right past
every horizon, in float32 and int8; its time-invariant control is blind past its 113 b's.

**Trained** (:mod:`.train`): one layer of each class (``lti``: real eigenvalues tanh(ρ) and complex
exp(-exp(ν) + iθ), ``gate01``: sigmoid gates, ``gate11``: tanh gates) with a ReLU readout, on (aa)*, parity and
``b S a`` at one length (b S a on runs of b's up to that length), tested at several multiples of it and, for
b S a, at the end of runs past the float32 horizon of the trained time-invariant control. The (0, 1)-gate controls
on (aa)* and parity can only count at the training length, and a ReLU readout fits the parity of a count poorly
(they never fit 16 letters with the MLP alone): their readout adds a learned *count lookup* (a logit table per
integer, read through narrow bumps; gates started near 1), so that they fit the training length and their failing
beyond it, where the lookup was never trained, is the class's.
*Expressible* (a construction exists) and *learnable*
(some training run finds a rule that generalises) are reported separately; the claims compare each with the class
the paper says cannot. The languages live in :mod:`lab.datasets.languages`.

**In this lab.** :mod:`.model`, :mod:`.train`, :mod:`.experiment` (``run``), :mod:`.claims`, :mod:`.plots`,
:mod:`.live` (per-word trajectories for the ``expressiveness`` dashboard); notebook ``07_ssm_ltl.ipynb``.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="On the Expressiveness of State Space Models via Temporal Logics",
                     paper="arXiv:2601.19467",
                     summary="Hand-built Since, modular-counter and counting SSMs checked exactly in float32 and "
                             "int8 to 10^4, and one-layer models of each gating class trained on (aa)*, parity and "
                             "b S a.")

__all__ = ["METHOD"]
