"""Assertions shared by the data tests: a bad input is a ConfigError of exactly one line."""
import pytest

from jaxinit import data
from jaxinit.errors import ConfigError


def expect_error(cfg, *fragments):
    """`load_dataset(cfg)` raises a one-line ConfigError containing every fragment."""
    with pytest.raises(ConfigError) as info:
        data.load_dataset(cfg)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def one_line_error(fn, *args, match):
    """The message of the ConfigError `fn(*args)` raises; it must match and be a single line."""
    with pytest.raises(ConfigError, match=match) as info:
        fn(*args)
    assert "\n" not in str(info.value)
    return str(info.value)
