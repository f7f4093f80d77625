"""What the local executor's worker processes need before their first task, imported once by the fork server
they are forked from (:func:`bioanon.executors.start_worker_server`), never by user code.

A worker forked from a server that has these imported starts with them, its pages shared with the server: it no
longer spends about a second importing bioanon's task code and SciPy, and building the registry of installed
methods from their entry points, at the start of its first task, on the run's critical path. pandas is not among
them: pyarrow no longer loads it for numpy arrays (:mod:`bioanon.arrow_numpy`), and a task that needs it imports
it itself. The server is started before the run imports its data, so that this work happens on
a core the import leaves idle.

Importing this module never fails: anything that goes wrong here (a plugin that cannot be imported, say) is
left for the worker to meet, and report, itself. It logs and warns nothing, so that no message of the run is
printed twice.
"""

from __future__ import annotations

import logging
import warnings


def _warm() -> None:
    import numpy as np
    import pyarrow as pa
    import scipy.linalg  # noqa: F401 - the recognizers' and metrics' lazy imports
    import scipy.sparse  # noqa: F401

    import bioanon.evaluation.scoring  # noqa: F401
    import bioanon.evaluation.tasks  # noqa: F401
    from bioanon.plugins import get_plugin_manager

    pa.array(np.zeros(1, np.float32))  # pyarrow's first array sets up its conversions (pandas is not loaded)
    get_plugin_manager().registry  # noqa: B018 - built once here, inherited by every worker


def _preload() -> None:
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _warm()
    except Exception:  # noqa: BLE001, S110 - see the module's docstring
        pass
    finally:
        logging.disable(logging.NOTSET)


_preload()
