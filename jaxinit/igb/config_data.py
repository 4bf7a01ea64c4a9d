"""The IGB studies' data config: the shared `DataConfig` plus what only they use (binarised labels)."""
from __future__ import annotations

from dataclasses import dataclass

from jaxinit.config import DataConfig


@dataclass(frozen=True)
class IGBDataConfig(DataConfig):
    binarize: bool = True
    """labels -> label % 2: the studies' two-class task (f_max, per-class metrics)"""


__all__ = ["IGBDataConfig"]
