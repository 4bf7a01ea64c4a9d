"""Moved to `jaxinit.progress` (one reporter for every study). Delete this file once
jaxinit/forgetting/loop.py imports ``from jaxinit.progress import EpochProgress``."""
from jaxinit.progress import EpochProgress  # noqa: F401
