"""Attacker scenarios, the worst case and the headline metric: the one definition that config validation
(:mod:`~bioanon.evaluation.config`), planning (:mod:`~bioanon.evaluation.run`), the score task
(:mod:`~bioanon.evaluation.tasks`) and the report (:mod:`bioanon.report`) all read.

A *scenario* is what the attacker knows (DESIGN §7). Each one trains, enrols and probes a recognizer on clear,
anonymized or de-anonymized data (:func:`scenario_sets`):

========================  ==========  ==========  ==========
scenario                  training    enrolment   probe
========================  ==========  ==========  ==========
``clear`` (level)         clear       clear       clear
``naive``                 clear       clear       anon
``lazy``                  clear       anon        anon
``parrot``                anon        anon        anon
``parrot:<share>``        mix:share   anon        anon
``deanon``                clear       clear       deanon
========================  ==========  ==========  ==========

``clear`` and ``chance`` are *levels* every evaluation reports (:data:`ALWAYS_SCENARIOS`); a config lists only
attack scenarios (:func:`parse_scenario`). The *worst case* of an anonymizer setting is the attack row with
the highest value of the headline metric over recognizers × attack scenarios (:func:`worst_case`, ``clear``
excluded, ``deanon`` included unless asked otherwise); the *headline metric* is top-1 accuracy for identity and
balanced accuracy for an attribute label (:func:`headline_metric`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError

__all__ = [
    "ALWAYS_SCENARIOS",
    "ATTACK_SCENARIOS",
    "CHANCE",
    "CLEAR",
    "DEANON",
    "DEFAULT_SCENARIOS",
    "LAZY",
    "NAIVE",
    "PARROT",
    "SCENARIOS",
    "SCENARIOS_BASE",
    "VOICEPRIVACY_SCENARIOS",
    "attack_rows",
    "default_scenarios",
    "display_key",
    "display_name",
    "display_names",
    "display_order",
    "headline_metric",
    "headline_metric_of",
    "is_attack",
    "parrot_share",
    "parse_scenario",
    "planned_scenarios",
    "scenario_sets",
    "scenario_tables",
    "worst_case",
]

CLEAR = "clear"
CHANCE = "chance"
NAIVE = "naive"
LAZY = "lazy"
PARROT = "parrot"
DEANON = "deanon"
#: The start of the note on the metric rows of a de-anonymizer that did not learn (its learning check failed);
#: the reversibility table does not judge a setting on such rows.
NOT_CONVERGED = "attacker did not converge"

SCENARIOS = (NAIVE, LAZY, PARROT, DEANON)
"""Scenario names a config may list (besides ``parrot:<share>``)."""
ATTACK_SCENARIOS = SCENARIOS
"""The attack scenarios (every scenario but the levels); the same names as :data:`SCENARIOS`."""
ALWAYS_SCENARIOS = (CLEAR, CHANCE)
"""Levels every evaluation reports; never listed in a config."""
SCENARIOS_BASE = (CLEAR,) + SCENARIOS
"""The scenarios a score task runs (``clear`` and the attacks; ``parrot:<share>`` besides)."""
DEFAULT_SCENARIOS = (NAIVE, PARROT)
"""The scenarios of a config without ``scenarios`` (``deanon`` added when it has a ``[deanonymizer]``)."""

#: Display names of the attacker scenarios for data of the VoicePrivacy protocol (table metadata ``protocol =
#: "voiceprivacy"``): the challenge's attacker models. Only the report's wording; results keep bioanon's ids.
VOICEPRIVACY_SCENARIOS = {NAIVE: "ignorant", LAZY: "lazy-informed", PARROT: "semi-informed"}

# display order of the scenario ids: clear, the attacks by how much the attacker knows, de-anonymization last;
# parrot:<share> right after parrot (by share), unknown ids between parrot and deanon
_DISPLAY_RANK = {CLEAR: 0, NAIVE: 1, LAZY: 2, PARROT: 3, DEANON: 5}
_UNKNOWN_RANK = 4

# data of each scenario: (training, enrolment, probe); parrot:<share> is built by scenario_sets
_SETS = {
    CLEAR: ("clear", "clear", "clear"),
    NAIVE: ("clear", "clear", "anon"),
    LAZY: ("clear", "anon", "anon"),
    PARROT: ("anon", "anon", "anon"),
    DEANON: ("clear", "clear", "deanon"),
}
_MIX = "mix:"


# ------------------------------------------------------------------------------------------ names and parsing


def parrot_share(scenario: str) -> float | None:
    """The share of anonymized training samples of a ``parrot:<share>`` scenario; None for any other scenario.

    The share is not checked here (see :func:`parse_scenario`); a text that is no number raises ValueError."""
    head, sep, share = str(scenario).partition(":")
    return float(share) if head == PARROT and sep else None


def parse_scenario(text: str) -> str:
    """The scenario id of a config entry: one of :data:`SCENARIOS` or ``parrot:<share>`` with share in (0, 1),
    written back with Python's shortest float form (``"parrot: 0.50"`` is not accepted, ``"parrot:.5"`` becomes
    ``"parrot:0.5"``); surrounding blanks are ignored.

    Raises :class:`~bioanon.errors.ConfigError` with a message without the key path (the config prefixes it):
    a level of :data:`ALWAYS_SCENARIOS`, a share that is no number or outside (0, 1), or an unknown name (with
    the closest allowed name as a hint)."""
    s = text.strip()
    if s in ALWAYS_SCENARIOS:
        raise ConfigError(f"{s!r} is always evaluated; do not list it")
    if s.startswith(PARROT + ":"):
        try:
            share = parrot_share(s)
        except ValueError:
            raise ConfigError(f"expected 'parrot:<share>' with a number share in (0, 1), got {s!r}") from None
        assert share is not None
        if not 0 < share < 1:
            raise ConfigError(f"the parrot share must be in (0, 1), got {s!r}")
        return f"{PARROT}:{share!r}"
    if s not in SCENARIOS:
        head, sep, tail = s.partition(":")
        close = difflib.get_close_matches(head, SCENARIOS + ALWAYS_SCENARIOS, n=1, cutoff=0.6)
        hint = (
            f"did you mean {close[0] + sep + tail!r}?"
            if close
            else "allowed: naive, lazy, parrot, parrot:<share>, deanon"
        )
        raise ConfigError(f"unknown scenario {s!r}; {hint}")
    return s


def default_scenarios(has_deanonymizer: bool) -> tuple[str, ...]:
    """The scenarios of a config that lists none: :data:`DEFAULT_SCENARIOS`, plus ``deanon`` with a
    de-anonymizer."""
    return DEFAULT_SCENARIOS + ((DEANON,) if has_deanonymizer else ())


def is_attack(scenario: str) -> bool:
    """Whether ``scenario`` is an attack (not one of the levels :data:`ALWAYS_SCENARIOS`)."""
    return scenario not in ALWAYS_SCENARIOS


def planned_scenarios(scenarios: Iterable[str]) -> list[str]:
    """The scenarios one recognizer is scored under, in plan order: ``clear`` first, then the configured attack
    scenarios in config order (this order is the worst case's tie order in the run's tables)."""
    return [CLEAR] + [s for s in scenarios if s != CLEAR]


# ------------------------------------------------------------------------------------------------ data sets


def scenario_sets(scenario: str) -> tuple[str, str, str]:
    """(training, enrolment, probe) data of an attacker scenario: 'clear', 'anon', 'mix:<share>' or 'deanon'."""
    if scenario.startswith(PARROT + ":"):
        return _MIX + scenario.split(":", 1)[1], "anon", "anon"
    return _SETS[scenario]


def scenario_tables(scenario: str, sets: Mapping[str, str], attacker_fit: str = "attacker") -> dict[str, str]:
    """Only the tables a scenario reads, from ``sets`` (``clear_attacker``, ``anon_evaluation``, ... → table
    key), so a score task's key does not depend on the others. The clear evaluation set is always read (the
    clear level); with ``attacker_fit = "enrolment"`` no attacker set: the recognizer is fitted on evaluation
    data."""
    train, enrol, probe = scenario_sets(scenario)
    need = {"clear_evaluation"}
    where = "evaluation" if attacker_fit == "enrolment" else "attacker"
    if train == "clear" or train.startswith(_MIX):
        need.add(f"clear_{where}")
    if train == "anon" or train.startswith(_MIX):
        need.add(f"anon_{where}")
    for kind in (enrol, probe):
        need.add(f"{kind}_evaluation")
    return {k: sets[k] for k in sorted(need)}


# -------------------------------------------------------------------------------------- display order and names


def display_key(scenario: Any) -> tuple[int, str, int, float, str]:
    """Sort key of a scenario id in the report's display order: clear, naive, lazy, parrot, parrot:<share> (by
    share), unknown ids, deanon."""
    base, _, share = str(scenario).partition(":")
    try:
        frac = float(share) if share else 0.0
    except ValueError:
        frac = 0.0
    return (_DISPLAY_RANK.get(base, _UNKNOWN_RANK), base, 1 if share else 0, frac, str(scenario))


def display_order(values: Iterable[Any]) -> list[Any]:
    """The distinct scenario ids of ``values`` in display order (:func:`display_key`)."""
    return sorted(dict.fromkeys(values), key=display_key)


def display_names(protocol: str | None) -> dict[str, str]:
    """Scenario id → display name for data of ``protocol`` (table metadata ``protocol``): the VoicePrivacy
    Challenge's names for ``"voiceprivacy"`` (:data:`VOICEPRIVACY_SCENARIOS`), else none."""
    return dict(VOICEPRIVACY_SCENARIOS) if protocol == "voiceprivacy" else {}


def display_name(scenario: Any, names: Mapping[str, str]) -> str:
    """A scenario's display name under ``names`` (:func:`display_names`): ``"ignorant (naive)"`` or
    ``"semi-informed (parrot:0.5)"`` when its base id has a name, else the id itself."""
    base = str(scenario).partition(":")[0]
    name = names.get(base)
    return f"{name} ({scenario})" if name else str(scenario)


# --------------------------------------------------------------------------------- headline and worst case


def headline_metric(label: str) -> str:
    """The metric of the headline, the privacy–utility trade-off and the attacker-too-weak guard for an
    evaluation of ``label``: ``top1`` for identity (``"subject"``); ``balanced_accuracy`` (chance uniform,
    1/|classes|) for an attribute label, where plain accuracy's floor is the majority-class rate and a majority
    guesser would look like a successful attack."""
    return "top1" if label == "subject" else "balanced_accuracy"


def headline_metric_of(metrics: Any) -> str:
    """:func:`headline_metric` of a metrics table (its ``label`` column): balanced accuracy when any row is of
    an attribute label, else top-1 (also for an empty table or one without ``label``)."""
    if "label" in metrics.columns and len(metrics):
        attribute = metrics.label[metrics.label != "subject"]
        if len(attribute):
            return headline_metric(str(attribute.iloc[0]))
    return headline_metric("subject")


def attack_rows(rows: Any, *, deanon: bool = True) -> Any:
    """The rows of a table with a ``scenario`` column that are attacks (not the ``clear`` level); without the
    ``deanon`` scenario when ``deanon`` is false (the trade-off's curve without de-anonymization)."""
    keep = rows["scenario"] != CLEAR
    if not deanon:
        keep &= rows["scenario"] != DEANON
    return rows[keep]


def worst_case(
    rows: Any, keys: Sequence[str] = (), *, recognizers: Sequence[str] | None = None, deanon: bool = True
) -> Any:
    """The worst case: per group of ``keys`` (the whole table when empty) the attack row (:func:`attack_rows`)
    with the highest ``value``, i.e. the maximum over recognizers × attack scenarios. ``rows`` holds one value
    per recognizer × scenario of a group (already the mean over repeats and draws); rows whose value is NaN
    are left out, and a group without any attack row is absent from the result.

    Ties, one rule for the run's tables and the report: the first recognizer in ``recognizers`` order (default:
    their order of first appearance in ``rows``, which in the run's tables is the config order; recognizers not
    listed come last), then the first scenario in display order (:func:`display_key`). The order of ``rows``
    decides nothing else. A pandas DataFrame with the columns of ``rows``, one row per group."""
    att = attack_rows(rows, deanon=deanon)
    att = att[att["value"].notna()]
    if att.empty:
        # kept as an empty frame with the columns the callers read, whatever ``rows`` had
        return att.assign(recognizer=[], scenario=[]).iloc[:0]
    order = list(recognizers) if recognizers is not None else list(dict.fromkeys(att["recognizer"]))
    rank = {r: i for i, r in enumerate(order)}
    att = (
        att.assign(
            _r=att["recognizer"].map(lambda r: rank.get(r, len(rank))),
            _s=att["scenario"].map(display_key),
        )
        .sort_values(["_r", "_s"], kind="stable")
        .drop(columns=["_r", "_s"])
    )
    if not keys:
        return att.loc[[att["value"].idxmax()]]
    idx = att.groupby(list(keys), dropna=False, sort=False)["value"].idxmax()
    return att.loc[idx.to_numpy()]
