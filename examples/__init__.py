"""The example configs and the plugin template, installed with bioanon as ``bioanon.examples``.

``bioanon init`` lists and copies the configs, ``bioanon new-plugin`` copies the template, and
``bioanon.example("quickstart")`` gives a config's installed path (see :mod:`bioanon.scaffold`).
"""
