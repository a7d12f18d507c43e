"""A database URL nothing can open is one line naming COMPAT_DATABASE_URL and its value, exit 2, before a sweep
starts (issue 19: a 104-440-line traceback, and the sweep had started)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cli import app as cli
from compat.settings import get_settings


def _compat(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp: Path, url: str,
            *args: str) -> tuple[int, str]:
    monkeypatch.setenv("COMPAT_DATABASE_URL", url)
    monkeypatch.setenv("COMPAT_VAR_DIR", str(tmp))
    monkeypatch.setattr(sys, "argv", ["compat", *args])
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit) as done:
            cli.main()  # the console entry point: where a SettingError becomes one line
    finally:
        get_settings.cache_clear()
    out = capsys.readouterr()
    return done.value.code, (out.out + out.err).strip()


@pytest.mark.parametrize("url", ["bogus://x", "sqlite:///{tmp}/a-file/x.db"])
def test_a_database_url_nothing_can_open_is_one_line(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    url = url.format(tmp=tmp_path)
    code, out = _compat(monkeypatch, capsys, tmp_path, url, "runs", "list")
    assert code == 2 and out.startswith(f"error: COMPAT_DATABASE_URL={url!r}"), out
    assert len(out.splitlines()) == 1 and "Traceback" not in out


def test_a_sweep_with_a_bad_database_url_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    code, out = _compat(monkeypatch, capsys, tmp_path, "bogus://x", "sweep", "--device", "cpu", "--arch",
                        "GPT2LMHeadModel", "--jobs", "0")
    assert code == 2 and out.splitlines()[-1].startswith("error: COMPAT_DATABASE_URL='bogus://x'"), out
    assert "to do" not in out and "[compat]" not in out  # nothing started
