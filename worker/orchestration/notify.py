"""Telling people about a run: one webhook POST per run with confirmed regressions, one GitHub issue per failure
signature (a repeat comments, a fix closes), each bounded in time, logged without credentials, recorded on the run.

What is said is ``compat.alerts`` (pure); this module only sends it. Off unless ``COMPAT_NOTIFY_WEBHOOK`` or
``COMPAT_GITHUB_REPO`` + ``COMPAT_GITHUB_TOKEN`` are set. A failed delivery never fails the run: it is logged and
recorded (``runs.notifications``), and each request gets ``notify_timeout_s`` and ``notify_retries`` more tries.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

from compat import alerts
from compat.diff import Change, RunDiff
from compat.results import ResultRecord
from compat.settings import Settings, get_settings

log = logging.getLogger(__name__)
_ISSUE_PAGES = 10  # open issues read per run: 10 pages of 100 (a repository with more open ones is not ours to scan)
_MAX_ACTIONS = 30  # GitHub writes per run: each is bounded, so the run's delay is too (more: counted, not done)
_BACKOFF_S = 0.5  # before a retry, doubled each time (the bounded retry: at most retries * 2 s of sleep)


class NotifyStore(Protocol):
    def claim_notifications(self, run_id: str) -> bool: ...
    def set_notifications(self, run_id: str, state: dict) -> None: ...
    def run_identity(self, run_id: str) -> dict: ...
    def run_results(self, run_id: str) -> list[ResultRecord]: ...


class DeliveryError(Exception):
    """A request that failed after its tries; the message names no URL path, query or credential."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


def _where(url: str) -> str:
    """What a log line may say about an endpoint: its scheme and host (a webhook's path is its secret)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{parts.port}" if parts.port else "")


def _decoded(raw: bytes) -> Any:
    """A reply's JSON, or its text: a webhook may answer plain text (Slack's incoming webhook replies with a text
    body, ``IncomingWebhookResult.text`` in https://docs.slack.dev/tools/node-slack-sdk/reference/webhook/), and a
    reply that is not JSON is no failed delivery."""
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return raw.decode(errors="replace")


def request(method: str, url: str, *, body: Any = None, headers: dict[str, str] | None = None,
            timeout_s: float, retries: int) -> tuple[int, Any, int]:
    """One JSON request with ``retries`` more tries on a connection error, a timeout, 429 or 5xx; returns (status,
    decoded JSON or None, attempts). Another 4xx is not retried. Raises DeliveryError after the last try."""
    data = json.dumps(body).encode() if body is not None else None
    hdrs = {"Content-Type": "application/json", "Accept": "application/json",
            "User-Agent": "neuron-compat-notify", **(headers or {})}
    last = ""
    for attempt in range(1, retries + 2):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=hdrs, method=method),
                                        timeout=timeout_s) as resp:
                return resp.status, _decoded(resp.read()), attempt
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
            if exc.code < 500 and exc.code != 429:
                raise DeliveryError(last, attempt) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            # str(URLError) is "<urlopen error [Errno 111] Connection refused>": the reason only, never the URL.
            last = type(exc).__name__ + (f": {exc.reason}" if isinstance(exc, urllib.error.URLError) else "")
        if attempt <= retries:
            time.sleep(_BACKOFF_S * 2 ** (attempt - 1))
    raise DeliveryError(last, retries + 1)


def send_webhook(url: str, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """POST the payload; the delivery state (never the URL)."""
    try:
        status, _reply, attempts = request("POST", url, body=body, timeout_s=settings.notify_timeout_s,
                                           retries=settings.notify_retries)
    except DeliveryError as exc:
        log.warning("webhook to %s failed after %d attempt(s): %s", _where(url), exc.attempts, exc)
        return {"state": "failed", "attempts": exc.attempts, "error": str(exc)}
    log.info("webhook to %s: HTTP %d", _where(url), status)
    return {"state": "sent", "attempts": attempts, "http_status": status}


class GitHub:
    """The few REST calls the issue lifecycle needs, against ``github_api_url`` (tests: a fake on 127.0.0.1):
    list open issues by label (pull requests come back too, marked by a ``pull_request`` key), create one, comment,
    edit the body, close with ``state_reason: completed`` (https://docs.github.com/en/rest/issues/issues,
    https://docs.github.com/en/rest/issues/comments; API version header 2022-11-28)."""

    def __init__(self, settings: Settings) -> None:
        self.base = f"{settings.github_api_url.rstrip('/')}/repos/{settings.github_repo}"
        self._headers = {"Authorization": f"Bearer {settings.github_token.get_secret_value()}",
                         "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
        self._timeout, self._retries = settings.notify_timeout_s, settings.notify_retries

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        return request(method, self.base + path, body=body, headers=self._headers, timeout_s=self._timeout,
                       retries=self._retries)[1]

    def open_issues(self) -> list[dict[str, Any]]:
        """Open issues with our label (pull requests left out), up to ``_ISSUE_PAGES`` pages."""
        out: list[dict[str, Any]] = []
        for page in range(1, _ISSUE_PAGES + 1):
            rows = self._call("GET", f"/issues?state=open&labels={alerts.ISSUE_LABEL}&per_page=100&page={page}") or []
            out += [r for r in rows if "pull_request" not in r]
            if len(rows) < 100:
                break
        return out

    def apply(self, action: alerts.IssueAction) -> int | None:
        """Carry out one action; the issue number it touched."""
        if action.kind == "open":
            made = self._call("POST", "/issues", {"title": action.title[:250], "body": action.body,
                                                  "labels": [alerts.ISSUE_LABEL]})
            return int(made["number"]) if made else None
        self._call("POST", f"/issues/{action.number}/comments", {"body": action.body})
        if action.kind == "comment" and action.new_body is not None:
            self._call("PATCH", f"/issues/{action.number}", {"body": action.new_body})
        if action.kind == "close":
            self._call("PATCH", f"/issues/{action.number}", {"state": "closed", "state_reason": "completed"})
        return action.number


def sync_issues(diff: RunDiff, current: list[ResultRecord], settings: Settings, *,
                confirmed: Sequence[Change] | None = None,
                signatures: Sequence[alerts.Signature] | None = None) -> dict[str, Any]:
    """Open, comment on and close the repository's issues after a run; the delivery state."""
    gh = GitHub(settings)
    done: list[dict[str, Any]] = []
    try:
        status = {r.key: str(r.status) for r in current}
        todo = alerts.issue_actions(diff, gh.open_issues(), status, public_url=settings.public_url,
                                    confirmed=confirmed, signatures=signatures)
        for action in todo[:_MAX_ACTIONS]:
            done.append({"action": action.kind, "signature": action.signature, "issue": gh.apply(action)})
    except DeliveryError as exc:
        log.warning("GitHub issues of %s failed after %d attempt(s): %s (%d action(s) done)",
                    settings.github_repo, exc.attempts, exc, len(done))
        return {"state": "failed", "error": str(exc), "actions": done}
    log.info("GitHub issues of %s: %s", settings.github_repo,
             ", ".join(f"{a['action']} #{a['issue']}" for a in done) or "nothing to do")
    return {"state": "sent", "actions": done, "skipped_over_cap": max(0, len(todo) - _MAX_ACTIONS)}


def deliver(store: NotifyStore, diff: RunDiff, *, confirmed: Sequence[Change] | None = None,
            signatures: Sequence[alerts.Signature] | None = None, settings: Settings | None = None,
            ) -> dict[str, Any] | None:
    """Notify once per run about ``diff`` (its baseline chosen by the caller): the webhook when there are confirmed
    regressions, the GitHub issues whenever a baseline exists (a fix closes). Returns what was recorded on the run,
    or None when nothing is configured, there is no baseline, or the run already had its turn.

    The seam for the flake guard and signatures (issue 34 items 1, 3): ``confirmed`` (default every regression) and
    ``signatures`` (default ``compat.alerts.signatures_of``)."""
    settings = settings or get_settings()
    hook = settings.notify_webhook.get_secret_value()
    github = bool(settings.github_repo and settings.github_token.get_secret_value())
    if not (hook or github) or diff.baseline_run is None:
        return None
    regs = list(diff.regressions if confirmed is None else confirmed)
    if not store.claim_notifications(diff.current_run):
        return None
    record: dict[str, Any] = {"state": "done", "confirmed_regressions": len(regs)}
    try:
        identity = store.run_identity(diff.current_run)
        if hook:
            body = alerts.payload(diff, identity=identity, public_url=settings.public_url, confirmed=regs,
                                  signatures=signatures)
            record["webhook"] = send_webhook(hook, body, settings) if body else {"state": "nothing_to_send"}
        if github:
            record["github"] = sync_issues(diff, store.run_results(diff.current_run), settings, confirmed=regs,
                                           signatures=signatures)
    except Exception as exc:  # noqa: BLE001 - a notification never fails the run; what went wrong is recorded
        log.warning("notifications of run %s failed: %s", diff.current_run, type(exc).__name__)
        record.update(state="failed", error=type(exc).__name__)
    store.set_notifications(diff.current_run, record)
    return record


def summary(record: dict[str, Any]) -> str:
    """One line for the CLI: what each channel did (``webhook sent``, ``github failed: HTTP 401``)."""
    parts = []
    for channel in ("webhook", "github"):
        if (st := record.get(channel)) is not None:
            parts.append(f"{channel} {st['state']}" + (f": {st['error']}" if st.get("error") else ""))
    if record.get("state") == "failed":
        parts.append(f"failed: {record.get('error')}")
    return ", ".join(parts) or "nothing configured"
