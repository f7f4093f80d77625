"""pytest configuration of the plugin's tests."""

# bioanon's pytest plugin: the fixtures register_bioanon_plugin, bioanon_plugin_manager, make_sample_table and
# tiny_table. It is not loaded in every pytest run of the environment, only where a conftest.py (this one) or
# ``pytest -p bioanon.testing`` asks for it.
pytest_plugins = ["bioanon.testing"]
