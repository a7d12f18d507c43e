"""The store does not depend on the current directory, and a read names the store it read (issue 19: `compat` run
outside the repo root silently created an empty ./var/compat.db there and reported "no results")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compat.settings import PROJECT, Settings, default_var_dir

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT_DB = ROOT / "var" / "compat.db"


def _compat(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``compat ARGS`` run from ``cwd`` with a bare environment: no COMPAT_* setting, HOME and XDG in tmp."""
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HOME": str(cwd / "home"),
            "XDG_DATA_HOME": str(cwd / "xdg")}
    return subprocess.run([sys.executable, "-m", "cli.app", *args], capture_output=True, text=True, cwd=cwd,
                          env={**base, **env}, timeout=300)


def test_the_default_store_is_the_checkouts_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in [k for k in os.environ if k.startswith("COMPAT_")]:
        monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert settings.var_dir == ROOT / "var"
    assert settings.database_url == f"sqlite:///{CHECKOUT_DB}"


def test_outside_a_checkout_the_store_is_the_users_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed = tmp_path / "site-packages" / "compat"  # a wheel's package: no pyproject.toml beside it
    installed.mkdir(parents=True)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_var_dir(installed) == tmp_path / "xdg" / PROJECT
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_var_dir(installed) == tmp_path / "home" / ".local" / "share" / PROJECT
    other = tmp_path / "other"  # another project's checkout around the package is not this one's
    (other / "compat").mkdir(parents=True)
    (other / "cli").mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert default_var_dir(other / "compat") == tmp_path / "home" / ".local" / "share" / PROJECT
    (other / "pyproject.toml").write_text(f'[project]\nname = "{PROJECT}"\n')
    assert default_var_dir(other / "compat") == other / "var"


def test_the_environment_still_chooses_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPAT_DATABASE_URL", raising=False)
    monkeypatch.setenv("COMPAT_VAR_DIR", str(tmp_path / "v"))
    assert Settings().database_url == f"sqlite:///{tmp_path / 'v' / 'compat.db'}"  # the database follows var_dir
    monkeypatch.setenv("COMPAT_DATABASE_URL", "sqlite:////elsewhere/x.db")
    assert Settings().database_url == "sqlite:////elsewhere/x.db"


@pytest.mark.parametrize("args", [["show", "LlamaForCausalLM", "--device", "mps"], ["blockers", "--device", "mps"]])
def test_a_read_from_another_directory_names_the_store_and_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    existed = CHECKOUT_DB.exists()
    done = _compat(tmp_path, *args)
    assert done.returncode == 1, done.stdout + done.stderr
    # No results on mps (the checkout's store, if there is one, holds none): the message says which store it read.
    assert "no results" in done.stderr and f"in sqlite:///{CHECKOUT_DB}" in done.stderr, done.stderr
    assert "run `compat sweep` first" in done.stderr
    assert not (tmp_path / "var").exists()
    assert CHECKOUT_DB.exists() == existed  # a read creates no store


@pytest.mark.parametrize("args", [["show", "LlamaForCausalLM"], ["blockers"], ["show", "NotStoredForCausalLM"],
                                  ["sweep", "--resume", "abc123"]])
def test_a_read_of_a_missing_store_creates_none(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "nowhere" / "compat.db"
    done = _compat(tmp_path, *args, COMPAT_DATABASE_URL=f"sqlite:///{db}", COMPAT_VAR_DIR=str(tmp_path / "v"))
    assert done.returncode in (1, 2), done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("error: "), done.stderr
    if "NotStoredForCausalLM" not in args:  # that one is a typo: "did you mean", not the store
        assert f"sqlite:///{db}" in done.stderr, done.stderr
    assert not db.parent.exists()
