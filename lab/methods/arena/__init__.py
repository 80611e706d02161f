r"""The sequence-model arena: every architecture of the lab on the same tasks, lengths and budgets.

Not one paper but the comparison the papers of this lab leave to their readers. Each of them compares a few
architectures on its own tasks and budgets (ssm_ltl: gating classes on formal languages; psm: prefix-scannable models
against a transformer, LRU and Mamba; chaingpt: multi-substep delta rules); zoology (Arora et al. 2024) compares
recall, MAD (Poli et al. 2024) synthetic skills, both on GPUs and never past the training length. Here every model of
:mod:`lab.core.zoo` is trained at one parameter budget on the same tasks of :mod:`lab.datasets.synthetic`, at one
length, and tested at several multiples of it, over seeds, beside what theory says it can do (:mod:`.model`).

**The models** (:mod:`lab.core.zoo`, one ``TokenModel`` each, the width chosen to meet the budget): diagonal
complex LTI layers (LRU, S5), selective SSMs (Mamba, Mamba-2), a gated diagonal linear RNN with gates in (0, 1) and
its twin with gates in (-1, 1), the gated delta rule with ``β`` in (0, 1) and in (0, 2), GRU and LSTM, and a causal
transformer without positions or with rotary ones. Every sequence opens with a start token (for every model: a
transformer without positions counts from it).

**The tasks**: parity, counting mod 5 and the word problems of S3 and A5 (the running group element at every
position), multi-query associative recall, Dyck-1 and a^n b^n c^n (prefix membership), and MAD's skills
(:mod:`lab.datasets.mad`: selective copying, noisy recall, compression, memorisation; each states what its length
means).

**What is measured** (:mod:`.experiment`): accuracy over every labelled position and over the positions beyond the
training length at each test length, the inference state one sequence holds (bytes; a transformer's key-value cache
grows with the length), training and one-token-at-a-time tokens per second.

**The claims** (:mod:`.claims`) are theory's separations, each against the same layer without the property its
theorem needs: a diagonal recurrence with gates in (-1, 1) tracks parity at every length, with gates in (0, 1) it
cannot (Grazzi et al. 2025; the headline); the same for the delta rule with ``β`` in (0, 2) against (0, 1); a
transformer without positions does not; recall against state size is a report row (zoology).

**Scale-out.** The arena is a grid (models x tasks x seeds) of independent trainings: ``lab run arena`` trains the
missing cells on the local cores (:mod:`lab.core.parallel`), ``lab sweep arena --seeds 0-2`` runs whole seeds on a
Dask cluster, resumable.

**In this lab.** :mod:`.model` (theory's predictions), :mod:`.train`, :mod:`.experiment` (``run``), :mod:`.claims`,
:mod:`.plots`; notebook ``20_arena.ipynb``.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="The sequence-model arena: every architecture of the lab on the same tasks, lengths and "
                           "budgets",
                     paper="lab synthesis (issue 41)",
                     summary="Every sequence model of the lab at one parameter budget on state tracking, counting, "
                             "recall and formal languages, trained at one length and tested to 8x, against the "
                             "theory of what each class can express.")

__all__ = ["METHOD"]
