"""The evaluation report: headline table, plots and a self-contained ``report.html`` from a results directory.

``render_report(RUN_DIR)`` reads the results folder the evaluation pipeline wrote and writes
``RUN_DIR/report.html``
— one self-contained file to share: plots inline as SVG, no other file and no absolute path referenced, laid out for
desktops and phones — and the same plots as ``RUN_DIR/plots/*.png`` for slides; :func:`plots` returns the figures
(matplotlib, each with a caption saying how to read it) without writing anything, and :func:`headline` the
headline privacy figure per anonymizer setting. :func:`task_timeline` draws where a run's time went (each task on
the process that ran it), from ``environment.json``. Nothing is recomputed from scores: the tables and plots only
aggregate the stored metrics (means over repeats and draws, the maximum over recognizers × scenarios) and draw the
privacy–utility envelope with :func:`bioanon.metrics.tradeoff_envelope`.

The page opens with the privacy–utility map at a glance: the headline table pairs each setting's worst case (CI,
recognizer and scenario) with its utility (:func:`bioanon.report.tables.pair_utility`, which
:meth:`bioanon.EvaluationResult.summary` uses too) and the ``overview`` plot draws utility against worst-case
privacy. Each plot is inline in a desktop and a phone layout; a plot of a single point is a sentence instead.
Rendering is cached by content (a digest of the inputs in the page's head): an unchanged rerun reuses the body.

Input files (``metrics.parquet`` is required, everything else is optional)::

    config.json        resolved config          environment.json   versions, seed, times
    metrics.parquet    tidy metric rows         utility.parquet    utility measures per setting × repeat
    tradeoff.parquet   privacy–utility points   auc.parquet        AUC per curve, ``counted`` marks the lower one
    warnings.json      sanity-guard messages    failures.json      [{"task", "error"}] of failed tasks
    breakdown.parquet  EER and min Cllr per group of ``[report] breakdown`` (e.g. per sex and per subset)

``environment.json``'s ``data`` block (:func:`bioanon.evaluation.run.data_description`) says how evaluation
subjects were split into enrolment and test (by the data's ``role`` column or a random share) and the data's
protocol: with ``protocol = "voiceprivacy"`` the attacker scenarios are shown with the VoicePrivacy Challenge's
names (:data:`VOICEPRIVACY_SCENARIOS`; the stored results keep bioanon's ids).

Definitions used throughout (the privacy–utility trade-off as the metrics documentation defines it; scenarios,
their display order and names, the worst case and the headline metric come from :mod:`bioanon.evaluation.scenarios`):

* the *worst case* of a setting is the highest top-1 accuracy over recognizers × attacker scenarios (every scenario
  except ``clear``, de-anonymization included), where each recognizer × scenario accuracy is first averaged over
  repeats and random-selection draws;
* the *clear level* is the highest top-1 accuracy over recognizers on clear data for the same selection;
* the headline uses the first selector (config order) at its largest subject count.

One module per concern: :mod:`~bioanon.report.results` loads a run's results, :mod:`~bioanon.report.tables`
aggregates them (headline, curves, reversibility), :mod:`~bioanon.report.figures` draws the plots and
:mod:`~bioanon.report.page` writes the HTML page; this package re-exports their public names.

matplotlib and pandas are imported lazily inside the functions, so ``import bioanon.report`` stays light. Figures
are drawn on the Agg canvas directly (no pyplot, no global backend switch), so rendering is safe in notebooks and
worker threads.
"""

from __future__ import annotations

from ..evaluation.scenarios import VOICEPRIVACY_SCENARIOS as VOICEPRIVACY_SCENARIOS
from .figures import DPI as DPI
from .figures import MAX_PANELS as MAX_PANELS
from .figures import MAX_REVERSIBILITY_FIGURES as MAX_REVERSIBILITY_FIGURES
from .figures import MAX_TRADEOFF_FIGURES as MAX_TRADEOFF_FIGURES
from .figures import PLOT_KINDS as PLOT_KINDS
from .figures import PLOT_PREFIXES as PLOT_PREFIXES
from .figures import Plot, plots, task_timeline, timeline_summary
from .figures import _point_labels as _point_labels  # used by the tests
from .page import comparator_notes as comparator_notes
from .page import device_summary as device_summary
from .page import render_report
from .results import AUC_COLUMNS as AUC_COLUMNS
from .results import BREAKDOWN_COLUMNS as BREAKDOWN_COLUMNS
from .results import METRICS_COLUMNS as METRICS_COLUMNS
from .results import PROTOCOL_COLUMNS as PROTOCOL_COLUMNS
from .results import TRADEOFF_COLUMNS as TRADEOFF_COLUMNS
from .results import UTILITY_COLUMNS as UTILITY_COLUMNS
from .results import ReportError, ResultsNotFoundError
from .results import _from_frames as _from_frames  # used by the tests
from .results import _load as _load  # used by the tests
from .tables import METRIC_LABELS as METRIC_LABELS
from .tables import REVERSIBILITY_THRESHOLDS as REVERSIBILITY_THRESHOLDS
from .tables import SUMMARY_METRICS as SUMMARY_METRICS
from .tables import _fmt as _fmt  # used by the tests
from .tables import _fmt_ci as _fmt_ci  # used by the tests
from .tables import _reversibility as _reversibility  # used by the tests
from .tables import _subject_curves as _subject_curves  # used by the tests
from .tables import _tradeoff_series as _tradeoff_series  # used by the tests
from .tables import headline

__all__ = [
    "Plot",
    "ReportError",
    "ResultsNotFoundError",
    "headline",
    "plots",
    "render_report",
    "task_timeline",
    "timeline_summary",
]
