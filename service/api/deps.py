"""Dependencies of the API routers: bearer-token check, rejection of unknown query params, documented errors.

Unknown query parameters are an error (422), so a typo in a filter never silently returns everything.
"""

from __future__ import annotations

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from service.auth import token_name
from service.deps import get_session
from service.schemas import ErrorBody

# Documented on every route so the OpenAPI schema matches what clients actually receive.
READ_ERRORS: dict[int | str, dict] = {
    404: {"model": ErrorBody, "description": "Not found"},
    422: {"model": ErrorBody, "description": "Invalid or unknown parameter"},
}
WRITE_ERRORS: dict[int | str, dict] = {
    **READ_ERRORS,
    400: {"model": ErrorBody, "description": "Malformed request body"},
    401: {"model": ErrorBody, "description": "Missing or invalid bearer token"},
    413: {"model": ErrorBody, "description": "Request body too large"},
}
# Creating a submission: the queue (or the token's share of it) is full (service.submissions.QueueFull).
QUEUE_FULL: dict[int | str, dict] = {
    429: {"model": ErrorBody, "description": "Submission queue full, or this token's share of it: retry later",
          "headers": {"Retry-After": {"description": "seconds until room is expected", "schema": {"type": "integer"}}}},
}

# Every 401 says how to get a token, where it is made (on the server's machine, against its database).
TOKEN_HINT = ": create one with `compat token create NAME` and send it as `Authorization: Bearer TOKEN`"
_bearer = HTTPBearer(auto_error=False, description="API token from `compat token create NAME`")


def require_token(creds: HTTPAuthorizationCredentials | None = Depends(_bearer),
                  session: Session = Depends(get_session)) -> str:
    """Name of the caller's token; 401 when missing or invalid."""
    if creds is None or creds.scheme.lower() != "bearer":
        raise HTTPException(401, f"missing bearer token{TOKEN_HINT}", headers={"WWW-Authenticate": "Bearer"})
    name = token_name(session, creds.credentials)
    if name is None:
        raise HTTPException(401, f"invalid or revoked token{TOKEN_HINT}", headers={"WWW-Authenticate": "Bearer"})
    return name


def reject_unknown_query(request: Request) -> None:
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    known = {p.alias for p in _all_query_params(dependant)}
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        raise HTTPException(422, [{"loc": ["query", k], "msg": "unknown query parameter", "type": "unknown"}
                                  for k in unknown])


def _all_query_params(dependant):  # noqa: ANN001, ANN202 - fastapi internals
    yield from dependant.query_params
    for sub in dependant.dependencies:
        yield from _all_query_params(sub)
