"""Claims: what a paper says, checked against a results Dataset alone, each with its control.

A :class:`Claim` measures one number from the Dataset (``measure``) and compares it with a threshold whose origin is
stated (``threshold_source``). Because the check reads only the Dataset, a saved NetCDF can be re-checked later
without re-running: ``lab.check(lab.load(path))``.

A claim proves itself with a **control**: ``control`` is the same measurement on a variant of the method that lacks
the claimed property (n = 2 for a dense-memory claim about n >= 3; the network without plasticity; a K-blind
model; random selection for a pruning score), computed in the same run and stored in the same Dataset. The verdict:

==========================  ====================================================================================
``holds``                   the measurement passes, every competence check passes and the control fails (or the
                            claim states why it has none)
``fails``                   the measurement does not pass
``control not competent``   the measurement passes, but a learned control (or a learned baseline the claim compares
                            against) fails its own competence check: it never learned what it was trained for, so
                            its failing proves nothing
``does not discriminate``   the measurement passes, but so does the control: the check cannot tell the effect
``reported``                a report row (``report=True``): a comparison the paper reports either way, no verdict
==========================  ====================================================================================

**Competent controls.** A control that never learned its task proves nothing (a tool-less model at 0% inside its
training range, a short-context baseline that cannot see the clue by construction). Every claim with a control says
which kind it is: a learned control, and every learned baseline a claim compares against, carries one or more
:class:`Competence` checks (the same model on what it was trained for, measured in the same run, with a bar and the
bar's source); an analytic control (n = 2, W = 0, random selection, an untrained reference) says so in
``control_analytic`` instead. The contract test checks that every control is one or the other.

**The headline.** Each method marks exactly one claim ``headline=True``: the paper's central result at this scale,
always a verdict, never a report row. The report index opens with every method's headline.

Ties never pass: a value equal to the threshold fails whatever the operator. A measurement that cannot be made, or
that is NaN, fails. A claim whose margin is within seed noise measures every seed and returns a
:class:`Measurement` with its ``per_seed`` values; the table shows the statistic (``value``), the spread and on how
many seeds the claim holds.

**Measure builders.** Most claims compare two quantities per seed. :class:`Pick` names one (a variable, a selection,
a label), and :func:`difference`, :func:`ratio`, :func:`share` (of seeds on which one beats the other) and
:func:`value` build the measure with its detail text, so a method's ``claims.py`` reads as a table::

    CompreSSM = Pick("accuracy", "CompreSSM", sel={"model": "compressm", "tau": claim_tau}, unit="%")
    Claim("beats_scratch", ..., measure=difference(CompreSSM, scratch), control=difference(scratch_b, scratch))
"""

from lab.claims.claim import VERDICTS, Claim, ClaimResult, Competence, CompetenceResult, evaluate, fmt
from lab.claims.measures import (
    MIN_SEED_SHARE,
    SEED_SHARE_UNIT,
    Measurement,
    Pick,
    difference,
    over_seeds,
    ratio,
    seed_share,
    share,
    value,
)
from lab.claims.table import VERDICT_CLASS, ClaimsTable, competence_text

__all__ = [
    "MIN_SEED_SHARE",
    "SEED_SHARE_UNIT",
    "VERDICTS",
    "VERDICT_CLASS",
    "Claim",
    "ClaimResult",
    "ClaimsTable",
    "Competence",
    "CompetenceResult",
    "Measurement",
    "competence_text",
    "evaluate",
    "fmt",
    "Pick",
    "difference",
    "over_seeds",
    "ratio",
    "seed_share",
    "share",
    "value",
]
