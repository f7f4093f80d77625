"""bioanon-gait: the bioanon plugin for 3-D skeleton and marker gait sequences.

Tables hold a ``pose`` payload ``(frames, joints, 3)`` (float32) plus the gait metadata described in
:mod:`bioanon_gait.skeleton` (joint names, body-part groups, frame rate, units, vertical axis).

* data sources (:mod:`~bioanon_gait.sources`, :mod:`~bioanon_gait.synthetic`): ``gait.ucalgary``, ``gait.c3d``,
  ``gait.csv``, ``gait.seba``, ``gait.synthetic``;
* anonymizations (:mod:`~bioanon_gait.anonymizers`): ``gait.noise``, ``gait.coarsen_time``,
  ``gait.coarsen_precision``, ``gait.resample``, ``gait.rolling_average``, ``gait.motion_extraction``,
  ``gait.trajectory_features``, ``gait.keep_parts``, ``gait.remove_parts``, ``gait.sum_of_parts``,
  ``gait.size_normalization``, ``gait.normalize``, ``gait.average_pose``, ``gait.first_pose``,
  ``gait.random_set_mean``, and ``gait.chain`` (deprecated: reads SEBA's old step strings and runs them as the
  core's ``any.chain``);
* recognizers (:mod:`~bioanon_gait.recognizers`, :mod:`~bioanon_gait.cnn`): ``gait.svm``,
  ``gait.random_forest``, ``gait.knn`` (on the ``flatten`` or ``simple`` features of
  :mod:`~bioanon_gait.features`: parameter ``features``), ``gait.cnn`` (PyTorch, optional);
* utility measures (:mod:`~bioanon_gait.utility`): ``gait.attribute_accuracy``, ``gait.dtw``,
  ``gait.frechet``, ``gait.euclidean``.
"""

__version__ = "0.1.0"
