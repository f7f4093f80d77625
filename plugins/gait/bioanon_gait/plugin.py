"""Entry point of bioanon-gait: registers its methods through bioanon's hooks.

Only light modules are imported here; heavy libraries are imported inside the methods.
The trait's methods arrive with the gait plugin issue; until then the plugin loads and registers nothing.
"""

from __future__ import annotations
