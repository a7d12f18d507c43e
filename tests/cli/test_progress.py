"""Progress off a terminal: one plain line per finished item with done/total, elapsed and eta, throttled where
asked, and a "still running" line whenever nothing was printed for a while; the live bar on a terminal."""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console

from cli.progress import (
    BarProgress,
    LineProgress,
    arch_note,
    duration,
    eta,
    fetch_progress,
    reporter,
)
from compat.results import Check, ResultRecord, Status


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def log_console() -> Console:
    return Console(file=io.StringIO(), width=40, force_terminal=False)  # narrower than a line: must not wrap


def lines(console: Console) -> list[str]:
    return console.file.getvalue().splitlines()


def test_durations_and_eta() -> None:
    assert [duration(s) for s in (0, 45.4, 185, 7260)] == ["0s", "45s", "3m05s", "2h01m"]
    assert eta(60, 0, 10) == "?"  # no pace yet
    assert eta(60, 2, 10) == "4m00s"  # 30 s per item, 8 left
    assert eta(60, 10, 10) == "0s"


def test_arch_note_gives_the_verdict_and_what_did_not_pass() -> None:
    def rec(check: str, status: str, op: str | None = None) -> ResultRecord:
        return ResultRecord(architecture="M", device="neuron", check=Check(check), status=Status(status),
                            blocking_op=op)

    ok = [rec(c, "pass") for c in ("load", "forward", "generate")]
    assert arch_note(ok) == "supported"
    bad = [rec("load", "pass"), rec("forward", "unsupported_op", "aten::histc (Int)"), rec("generate", "skipped")]
    assert arch_note(bad) == "failing: forward unsupported_op [aten::histc (Int)], generate skipped"


def test_a_line_per_item_with_counts_elapsed_and_eta() -> None:
    console, clock = log_console(), Clock()
    with LineProgress(console, 3, "sweep neuron", heartbeat_s=3600, clock=clock) as p:
        clock.now += 30
        p.advance("LlamaForCausalLM", "supported")
        clock.now += 90
        p.advance("MixtralForCausalLM", "failing: forward unsupported_op [aten::histc (Int)]")
        clock.now += 60
        p.advance("GPT2LMHeadModel", "supported")
    assert lines(console) == [
        "[0/3] sweep neuron: 3 to do",
        "[1/3] sweep neuron LlamaForCausalLM: supported | 30s elapsed, eta 1m00s",
        "[2/3] sweep neuron MixtralForCausalLM: failing: forward unsupported_op [aten::histc (Int)] | 2m00s elapsed,"
        " eta 1m00s",
        "[3/3] sweep neuron GPT2LMHeadModel: supported | 3m00s elapsed, eta 0s",
    ]


def test_counts_only_follow_and_throttled_lines() -> None:
    console, clock = log_console(), Clock()
    with LineProgress(console, 100, "configs", every_s=10, heartbeat_s=3600, clock=clock) as p:
        for done in range(1, 101):
            clock.now += 1  # one config a second: a line at most every 10 s, and the last one
            p.update(done, f"org/model-{done}")
        p.update(100, "again")  # no change, no line
    out = lines(console)
    assert out[0] == "[  0/100] configs: 100 to do"
    assert out[1] == "[ 10/100] configs org/model-10 | 10s elapsed, eta 1m30s"
    assert out[-1] == "[100/100] configs org/model-100 | 1m40s elapsed, eta 0s"
    assert len(out) == 1 + 10


def test_heartbeat_only_after_silence_and_never_when_done() -> None:
    console, clock = log_console(), Clock()
    p = LineProgress(console, 4, "sweep cpu", heartbeat_s=60, clock=clock)
    with p:
        clock.now += 59
        assert not p.heartbeat()
        clock.now += 1
        assert p.heartbeat()
        assert lines(console)[-1] == "[0/4] sweep cpu still running, nothing finished for 1m00s | 1m00s elapsed, eta ?"
        clock.now += 30
        assert not p.heartbeat()  # a line 30 s ago
        p.advance("A", "supported")
        clock.now += 90
        assert p.heartbeat()
        assert lines(console)[-1] == ("[1/4] sweep cpu still running, nothing finished for 1m30s | 3m00s elapsed, "
                                      "eta 9m00s")
        for name in "BCD":
            p.advance(name, "supported")
        clock.now += 600
        assert not p.heartbeat()


def test_the_heartbeat_thread_prints_on_its_own() -> None:
    printed = threading.Event()

    class Watch(io.StringIO):
        def write(self, s: str) -> int:
            if "still running" in s:
                printed.set()
            return super().write(s)

    console = Console(file=Watch(), force_terminal=False)
    with LineProgress(console, 2, "sweep cpu", heartbeat_s=0.05):
        assert printed.wait(timeout=30), console.file.getvalue()


def test_the_bar_on_a_terminal_lines_elsewhere() -> None:
    assert isinstance(reporter(Console(file=io.StringIO(), force_terminal=True), 3, "x"), BarProgress)
    assert isinstance(reporter(Console(file=io.StringIO(), force_terminal=False), 3, "x"), LineProgress)


@pytest.mark.parametrize("terminal", [False, True])
def test_fetch_progress_starts_when_the_listing_is_known(terminal: bool) -> None:
    console = Console(file=io.StringIO(), force_terminal=terminal, width=100)
    with fetch_progress(console, 50) as on_fetch:
        for done in range(1, 4):
            on_fetch(done, 3, f"org/m{done}")
    text = console.file.getvalue()
    assert "listed 3 of up to 50 text-generation models; reading their configs" in text
    if not terminal:
        assert text.splitlines()[-1].startswith("[3/3] configs org/m3 | ")
