"""loopstate over HTTP: a FastAPI router, an app factory, the inbox and run pages.

Needs the `service` extra (`pip install "loopstate[service]"`); `import loopstate` never
imports this package.

    service = Service({"docs": agent}, token="…")
    app = create_app(service)                       # or, in your own FastAPI app:
    app.include_router(service_router(service))     # and enter `service.lifespan()` in yours
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from loopstate.service import (
    api_forks,
    api_recovery,
    api_results,
    api_runs,
    api_streams,
    pages,
)
from loopstate.service.auth import Action, Authorize, Identity
from loopstate.service.door import Door
from loopstate.service.problems import (
    Problem,
    error_handler,
    http_handler,
    problem_handler,
    validation_handler,
)
from loopstate.service.service import Service, StreamPolicy

__all__ = [
    "Action",
    "Authorize",
    "Identity",
    "Problem",
    "Service",
    "StreamPolicy",
    "create_app",
    "install_errors",
    "service_router",
]


def service_router(service: Service) -> APIRouter:
    """Every endpoint (`/api/...` and `/ui/...`) as one router to mount; also call
    `install_errors(app)` so refusals are `application/problem+json`."""
    router = APIRouter()
    router.include_router(api_runs.routes(service))
    router.include_router(api_forks.routes(service))
    router.include_router(api_recovery.routes(service))
    router.include_router(api_results.routes(service))
    router.include_router(api_streams.routes(service))
    router.include_router(pages.routes(service))
    router.include_router(pages.root())
    return router


def install_errors(app: FastAPI) -> None:
    """Every refusal as `application/problem+json`: loopstate's, FastAPI's and Starlette's
    (404, 405, an unparsable body), and an unexpected failure as a one-line 500."""
    app.add_exception_handler(Problem, problem_handler)
    app.add_exception_handler(RequestValidationError, validation_handler)
    app.add_exception_handler(HTTPException, http_handler)
    app.add_exception_handler(Exception, error_handler)


def create_app(service: Service, *, docs: bool = True) -> FastAPI:
    """A FastAPI app serving `service`, whose lifespan runs the claim loop and the feed.
    Every request passes `Door` first (the token before the body; the body's size and
    type). `docs`: serve `/openapi.json` and `/docs` (behind the token like the API)."""
    app = FastAPI(
        title="loopstate",
        lifespan=service.lifespan,
        docs_url="/docs" if docs else None,
        redoc_url=None,
        openapi_url="/openapi.json" if docs else None,
    )
    install_errors(app)
    app.include_router(service_router(service))
    app.add_middleware(Door, guard=service.guard, max_body=service.max_body)
    return app
