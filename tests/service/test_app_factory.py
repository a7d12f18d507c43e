"""The app factory's hooks: the service is handed its submission runner and its pages; without them it serves the
API alone and stores submissions queued. One settings object per app, read by the API and the pages alike."""

from __future__ import annotations

from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from compat.settings import Settings, get_settings
from service import db
from service.app import create_app
from service.auth import create_token
from service.deps import app_settings, get_session


def _token(url: str) -> str:
    with db.session_scope(url) as s:
        return create_token(s, "hooks")


def test_without_hooks_the_api_serves_alone_and_submissions_stay_queued(sqlite_url: str) -> None:
    app = create_app(Settings(database_url=sqlite_url))
    with TestClient(app) as c:
        auth = {"Authorization": f"Bearer {_token(sqlite_url)}"}
        r = c.post("/api/v1/submissions", data={"model_id": "meta-llama/Llama-3.2-1B"}, headers=auth)
        assert r.status_code == 202
        assert c.get(r.json()["url"]).json()["state"] == "queued"
        assert c.get("/").status_code == 404  # no pages were handed in
        assert c.get("/healthz").json() == {"status": "ok", "database": "ok"}


def test_the_hooks_and_the_pages_use_the_apps_own_settings(sqlite_url: str, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    # The process-global settings point at another database and device: the app must never read them.
    monkeypatch.setenv("COMPAT_DATABASE_URL", f"sqlite:///{tmp_path / 'other.db'}")
    monkeypatch.setenv("COMPAT_DEVICE", "cuda")
    get_settings.cache_clear()
    enqueued: list[tuple[int, str]] = []
    mounted: list[FastAPI] = []

    def pages(app: FastAPI) -> None:
        mounted.append(app)

        @app.get("/page")
        def page(settings: Settings = Depends(app_settings), session: Session = Depends(get_session)) -> dict:
            return {"device": settings.device, "database": str(session.get_bind().url)}

    settings = Settings(database_url=sqlite_url, device="cpu")
    try:
        app = create_app(settings, enqueue_submission=lambda sid, url: enqueued.append((sid, url)), pages=pages)
        assert mounted == [app] and app.state.settings is settings
        with TestClient(app) as c:
            r = c.post("/api/v1/submissions", data={"model_id": "openai-community/gpt2"},
                       headers={"Authorization": f"Bearer {_token(sqlite_url)}"})
            assert r.status_code == 202
            assert c.get("/page").json() == {"device": "cpu", "database": sqlite_url}
        assert enqueued == [(r.json()["id"], sqlite_url)]
    finally:
        get_settings.cache_clear()
