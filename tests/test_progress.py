"""`jaxinit.progress`: one reporter for epochs and steps; a bar on a terminal, plain lines otherwise, off on request."""
import io
import sys

import pytest

from jaxinit import progress
from jaxinit.shared import sink


class _Terminal(io.StringIO):
    def isatty(self):
        return True


class _Closed(io.StringIO):
    def write(self, s):
        raise ValueError("I/O operation on closed file")


@pytest.fixture(autouse=True)
def _reporting(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)     # the test session silences progress (conftest)


def test_epochs_without_a_terminal_are_one_line_each():
    s = io.StringIO()
    p = progress.EpochProgress(3, 5, stream=s)
    p.epoch(3, 1.25, 0.4125)
    p.epoch(4, 0.5)
    p.epoch(5, 12.0, 1.0)
    p.close()
    assert s.getvalue() == "epoch 3/5  1.2 s  val_acc 0.412\nepoch 4/5  0.5 s\nepoch 5/5  12.0 s  val_acc 1.000\n"
    assert p.bar is None and p.total == 3


def test_steps_without_a_terminal_are_a_line_per_tenth():
    s = io.StringIO()
    p = progress.Progress(95, desc="igb_train steps", stream=s)
    for _ in range(95):
        p.update()
    lines = s.getvalue().splitlines()
    assert [ln.split()[2] for ln in lines] == [f"{k}/95" for k in range(10, 91, 10)] + ["95/95"]
    assert all(ln.startswith("igb_train steps ") and ln.endswith(" s") for ln in lines)
    s2 = io.StringIO()
    q = progress.Progress(6, unit="step", stream=s2, lines=3)
    q.update(5)                                   # jumps over two marks: one line
    q.update(1)
    assert [ln.split()[1] for ln in s2.getvalue().splitlines()] == ["5/6", "6/6"]


def test_a_terminal_gets_a_bar_and_no_lines():
    term = _Terminal()
    with progress.Progress(4, unit="step", desc="draws", stream=term) as p:
        assert p.bar is not None and p.bar.desc == "draws"
        p.update(4)
        assert p.bar.n == 4
    assert p.bar is None and "4/4" in term.getvalue()     # tqdm drew it
    e = progress.EpochProgress(1, 2, stream=_Terminal())
    e.epoch(1, 0.5, 0.25)
    assert e.bar.n == 1 and e.bar.desc == "epochs" and "0.250" in str(e.bar.postfix)
    e.close()


def test_without_tqdm_a_terminal_gets_the_lines(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)          # import tqdm now raises ImportError
    term = _Terminal()
    p = progress.EpochProgress(1, 2, stream=term)
    p.epoch(1, 0.5, 0.25)
    assert p.bar is None and term.getvalue() == "epoch 1/2  0.5 s  val_acc 0.250\n"


@pytest.mark.parametrize("value", ["0", "off", "False", " no "])
def test_off_by_environment(monkeypatch, value):
    monkeypatch.setenv(progress.ENV, value)
    for stream in (io.StringIO(), _Terminal()):
        p = progress.Progress(3, stream=stream)
        p.update(3)
        e = progress.EpochProgress(1, 1, stream=stream)
        e.epoch(1, 0.1)
        assert p.bar is None and e.bar is None and stream.getvalue() == ""


def test_off_by_argument_and_on_by_default():
    for stream in (io.StringIO(), _Terminal()):
        p = progress.Progress(3, stream=stream, enabled=False)
        p.update(3)
        progress.EpochProgress(1, 1, enabled=False, stream=stream).epoch(1, 0.1)
        assert stream.getvalue() == ""
    s = io.StringIO()
    progress.Progress(2, stream=s, enabled=None).update(2)     # None: report (the IGB studies' default)
    assert s.getvalue().startswith("steps 2/2")


def test_nothing_to_do_and_a_closed_stream_never_raise():
    p = progress.EpochProgress(4, 3, stream=_Terminal())     # a finished run resumed: no epochs left
    assert p.bar is None and p.total == 0
    p.close()
    dead = progress.Progress(2, stream=_Closed())
    dead.update(2)
    assert not dead.enabled
    e = progress.EpochProgress(1, 2, stream=_Closed())
    e.epoch(1, 0.1)
    e.epoch(2, 0.1)
    assert not e.enabled


def test_the_igb_bar_is_the_shared_reporter(monkeypatch, capsys):
    bar = sink.progress_bar(20, "igb_init draws")
    assert isinstance(bar, progress.Progress) and bar.enabled
    bar.update(20)
    bar.close()
    assert capsys.readouterr().err.splitlines()[-1].startswith("igb_init draws 20/20")
    assert not sink.progress_bar(20, "x", enabled=False).enabled
    monkeypatch.setenv(progress.ENV, "0")
    assert not sink.progress_bar(20, "x").enabled
