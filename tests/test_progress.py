"""`jaxinit.progress`: one reporter for epochs and steps; a bar on a terminal, plain lines otherwise, off on request.
Lines name the study and the stage, count in the study's unit, and give the time so far and the time left."""
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


class _Clock:
    """perf_counter as the test sets it."""
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture(autouse=True)
def _reporting(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)     # the test session silences progress (conftest)


@pytest.fixture
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(progress.time, "perf_counter", c)
    return c


def test_epochs_are_one_line_each_with_the_study_elapsed_time_and_eta(clock):
    s = io.StringIO()
    with progress.study("forgetting"):
        p = progress.Progress(3, unit="epoch", first=3, stream=s, lines=3)
    clock.now += 30.0                 # the first epoch compiles: it is left out of the rate
    p.update(1, "val_acc median/best sgd 0.412/0.431")
    clock.now += 5.0
    p.update(1)
    clock.now += 5.0
    p.update(1)
    p.close()
    assert s.getvalue().splitlines() == [
        "forgetting: epoch 3/5  30 s, ETA 1 min 00 s  val_acc median/best sgd 0.412/0.431",
        "forgetting: epoch 4/5  35 s, ETA 5 s  val_acc median/best sgd 0.412/0.431",
        "forgetting: epoch 5/5  40 s, ETA 0 s  val_acc median/best sgd 0.412/0.431"]
    assert p.bar is None and p.total == 3


def test_steps_are_called_steps_and_stages_are_named(clock):
    s = io.StringIO()
    with progress.study("igb_train"):
        first = progress.Progress(3, unit="step", stage="selection", stream=s, lines=3)
        second = progress.Progress(6, unit="step", stage="reported", stream=s, lines=2)
    for p in (first, second):
        for _ in range(p.total):
            clock.now += 1.0
            p.update()
    lines = s.getvalue().splitlines()
    assert [ln.split("  ")[0] for ln in lines] == [
        "igb_train selection: step 1/3", "igb_train selection: step 2/3", "igb_train selection: step 3/3",
        "igb_train reported: step 3/6", "igb_train reported: step 6/6"]
    assert not any("epoch" in ln for ln in lines)


def test_steps_without_a_terminal_are_a_line_per_tenth():
    s = io.StringIO()
    p = progress.Progress(95, desc="igb_train draws", stream=s)
    for _ in range(95):
        p.update()
    lines = s.getvalue().splitlines()
    assert [ln.split()[2] for ln in lines] == [f"{k}/95" for k in range(10, 91, 10)] + ["95/95"]
    assert all(ln.startswith("igb_train draws ") and ", ETA " in ln for ln in lines)
    s2 = io.StringIO()
    q = progress.Progress(6, unit="step", stream=s2, lines=3)
    q.update(5)                                   # jumps over two marks: one line
    q.update(1)
    assert [ln.split()[1] for ln in s2.getvalue().splitlines()] == ["5/6", "6/6"]


def test_a_note_stays_until_a_newer_one():
    s = io.StringIO()
    p = progress.Progress(4, unit="step", stream=s, lines=4)
    p.update(1, "val_acc median/best a 0.500/0.600")
    p.update(1)
    p.update(1, "val_acc median/best a 0.700/0.800")
    p.update(1)
    notes = [ln.split("  ")[-1] for ln in s.getvalue().splitlines()]
    assert notes == ["val_acc median/best a 0.500/0.600"] * 2 + ["val_acc median/best a 0.700/0.800"] * 2
    q = progress.Progress(10, unit="step", stream=io.StringIO(), lines=1)
    q.update(1, "a note")                         # no line of its own: the lines come at their marks
    assert q.stream.getvalue() == ""


def test_the_validation_note_is_per_group_never_one_average():
    rows = [{"member": 0, "val_acc": 0.2}, {"member": 1, "val_acc": 0.4}, {"member": 2, "val_acc": 0.9},
            {"member": 3, "val_acc": float("nan")}, {"member": 4}]
    group_of = {0: "sgd", 1: "sgd", 2: "adam", 3: "adam", 4: "adam"}
    assert progress.val_note(rows, group_of) == "val_acc median/best sgd 0.300/0.400 adam 0.900/0.900"
    assert progress.val_note([{"member": 0, "test_acc": 0.5}], group_of) == ""
    many = [{"member": i, "val_acc": 0.5} for i in range(6)]
    assert progress.val_note(many, {i: f"g{i}" for i in range(6)}).endswith("g3 0.500/0.500 (+2 more)")


@pytest.mark.parametrize("seconds, text", [(0.4, "0 s"), (59.4, "59 s"), (61, "1 min 01 s"), (3599, "59 min 59 s"),
                                           (7500, "2 h 05 min")])
def test_durations_read_as_time(seconds, text):
    assert progress.duration(seconds) == text


def test_a_terminal_gets_a_bar_and_no_lines():
    term = _Terminal()
    with progress.Progress(4, unit="step", desc="draws", stream=term) as p:
        assert p.bar is not None and p.bar.desc == "draws"
        p.update(4)
        assert p.bar.n == 4
    assert p.bar is None and "4/4" in term.getvalue()     # tqdm drew it
    with progress.study("forgetting"):
        e = progress.Progress(2, unit="epoch", stream=_Terminal())
    e.update(1, "val_acc median/best sgd 0.250/0.250")
    assert e.bar.n == 1 and e.bar.desc == "forgetting" and "0.250" in str(e.bar.postfix)
    e.close()


def test_without_tqdm_a_terminal_gets_the_lines(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)          # import tqdm now raises ImportError
    term = _Terminal()
    p = progress.Progress(2, unit="epoch", stream=term)
    p.update(1, "val_acc median/best sgd 0.250/0.250")
    assert p.bar is None and term.getvalue().startswith("epoch 1/2  ")


@pytest.mark.parametrize("value", ["0", "off", "False", " no "])
def test_off_by_environment(monkeypatch, value):
    monkeypatch.setenv(progress.ENV, value)
    for stream in (io.StringIO(), _Terminal()):
        p = progress.Progress(3, stream=stream)
        p.update(3, "a note")
        assert p.bar is None and stream.getvalue() == ""


def test_off_by_argument_and_on_by_default():
    for stream in (io.StringIO(), _Terminal()):
        p = progress.Progress(3, stream=stream, enabled=False)
        p.update(3, "a note")
        assert stream.getvalue() == ""
    s = io.StringIO()
    progress.Progress(2, stream=s, enabled=None).update(2)     # None: report (the IGB studies' default)
    assert s.getvalue().startswith("step 2/2")


def test_nothing_to_do_and_a_closed_stream_never_raise():
    p = progress.Progress(0, unit="epoch", first=4, stream=_Terminal())     # a finished run resumed: nothing left
    assert p.bar is None and p.total == 0
    p.close()
    dead = progress.Progress(2, stream=_Closed())
    dead.update(2)
    assert not dead.enabled
    dead.update(1, "a note")


def test_the_study_name_is_set_for_a_block_only():
    with progress.study("memory_phases"):
        inner = progress.Progress(1, stage="selection", stream=io.StringIO())
    outer = progress.Progress(1, stage="selection", stream=io.StringIO())
    assert inner.label == "memory_phases selection" and outer.label == "selection"


def test_the_igb_bar_is_the_shared_reporter(monkeypatch, capsys):
    with progress.study("igb_init"):
        bar = sink.progress_bar(20, "igb_init draws")      # names its study itself: not twice
    assert isinstance(bar, progress.Progress) and bar.enabled
    bar.update(20)
    bar.close()
    assert capsys.readouterr().err.splitlines()[-1].startswith("igb_init draws 20/20")
    assert not sink.progress_bar(20, "x", enabled=False).enabled
    monkeypatch.setenv(progress.ENV, "0")
    assert not sink.progress_bar(20, "x").enabled
