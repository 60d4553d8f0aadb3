from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path, re_path
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts.apis import TokenListApi, TokenRevokeApi
from agents.apis import AgentChatApi, AgentConsentRequestApi, AgentDetailApi, AgentListApi
from attachments.apis import MemoryPhotoListApi, PhotoDetailApi, PhotoFileApi
from circles.apis import (
    CircleDetailApi,
    CircleInviteDetailApi,
    CircleInviteListApi,
    CircleJoinRequestApproveApi,
    CircleJoinRequestDeclineApi,
    CircleJoinRequestListApi,
    CircleListApi,
    CircleMemberDetailApi,
    CircleMemberListApi,
    CircleMemoryDetailApi,
    CircleMemoryListApi,
    InviteAcceptApi,
    MemoryAuditApi,
    MemoryShareDetailApi,
    MemoryShareListApi,
    PersonAudienceConsentsApi,
)
from memories.apis import MemoryDetailApi, MemoryListApi, MemorySearchApi, MemorySimilarApi
from people.apis import (
    PersonConsentApi,
    PersonConsentEventListApi,
    PersonDetailApi,
    PersonListApi,
)


@csrf_exempt
def api_not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    """Unknown API paths (including malformed ids) answer JSON, not the HTML 404 page.

    CSRF-exempt: it changes nothing, and a token client's DELETE to a malformed id
    must get this 404, not the HTML CSRF page (DRF views exempt token requests themselves).
    """
    return JsonResponse({"detail": "Not found."}, status=404)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """settings' handler400: API and MCP callers get JSON; everyone else Django's page.

    Django answers a body over DATA_UPLOAD_MAX_MEMORY_SIZE (and other suspicious
    requests) through this handler, before any API view can render an error.
    """
    too_big = isinstance(exception, RequestDataTooBig)
    if too_big:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        message = f"Request body too large: at most {limit // 1024} KB."
    else:
        message = "Bad request."
    status = 413 if too_big else 400
    if request.path.startswith("/mcp"):
        # JSON-RPC's shape: the request could not be read, so it has no id.
        error = {"code": -32600, "message": message}
        return JsonResponse({"jsonrpc": "2.0", "id": None, "error": error}, status=status)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    return defaults.bad_request(request, exception)


# One list per resource, included under its id: the routes below an id read from that id on.
person_patterns = [
    path("", PersonDetailApi.as_view(), name="api-person"),
    path("consent/", PersonConsentApi.as_view(), name="api-person-consent"),
    path("consent-events/", PersonConsentEventListApi.as_view(), name="api-person-consent-events"),
    path("consents/", PersonAudienceConsentsApi.as_view(), name="api-person-consents"),
]
memory_patterns = [
    path("", MemoryDetailApi.as_view(), name="api-memory"),
    path("similar/", MemorySimilarApi.as_view(), name="api-memory-similar"),
    path("photos/", MemoryPhotoListApi.as_view(), name="api-memory-photos"),
    path("shares/", MemoryShareListApi.as_view(), name="api-memory-shares"),
    path("shares/<uuid:circle_id>/", MemoryShareDetailApi.as_view(), name="api-memory-share"),
    path("audit/", MemoryAuditApi.as_view(), name="api-memory-audit"),
]
circle_patterns = [
    path("", CircleDetailApi.as_view(), name="api-circle"),
    path("members/", CircleMemberListApi.as_view(), name="api-circle-members"),
    path("members/<int:user_id>/", CircleMemberDetailApi.as_view(), name="api-circle-member"),
    path("invites/", CircleInviteListApi.as_view(), name="api-circle-invites"),
    path("invites/<uuid:invite_id>/", CircleInviteDetailApi.as_view(), name="api-circle-invite"),
    path("requests/", CircleJoinRequestListApi.as_view(), name="api-circle-requests"),
    path(
        "requests/<uuid:request_id>/approve/",
        CircleJoinRequestApproveApi.as_view(),
        name="api-circle-request-approve",
    ),
    path(
        "requests/<uuid:request_id>/decline/",
        CircleJoinRequestDeclineApi.as_view(),
        name="api-circle-request-decline",
    ),
    path("memories/", CircleMemoryListApi.as_view(), name="api-circle-memories"),
    path("memories/<uuid:memory_id>/", CircleMemoryDetailApi.as_view(), name="api-circle-memory"),
]
agent_patterns = [
    path("", AgentDetailApi.as_view(), name="api-agent"),
    path("chat/", AgentChatApi.as_view(), name="api-agent-chat"),
    path("consent-requests/", AgentConsentRequestApi.as_view(), name="api-agent-consent-requests"),
]

v1_patterns = [
    path("people/", PersonListApi.as_view(), name="api-people"),
    path("people/<uuid:person_id>/", include(person_patterns)),
    path("", include("linked.api_urls")),
    path("memories/", MemoryListApi.as_view(), name="api-memories"),
    path("memories/search/", MemorySearchApi.as_view(), name="api-memory-search"),
    path("memories/<uuid:memory_id>/", include(memory_patterns)),
    path("photos/<uuid:photo_id>/", PhotoDetailApi.as_view(), name="api-photo"),
    path("photos/<uuid:photo_id>/file/", PhotoFileApi.as_view(), name="api-photo-file"),
    path("circles/", CircleListApi.as_view(), name="api-circles"),
    path("circles/<uuid:circle_id>/", include(circle_patterns)),
    path("invites/<str:token>/accept/", InviteAcceptApi.as_view(), name="api-invite-accept"),
    path("agents/", AgentListApi.as_view(), name="api-agents"),
    path("agents/<uuid:agent_id>/", include(agent_patterns)),
    path("tokens/", TokenListApi.as_view(), name="api-tokens"),
    path("tokens/<uuid:token_id>/revoke/", TokenRevokeApi.as_view(), name="api-token-revoke"),
    path("export/", include("portability.api_urls")),
]

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's init script from ?script, not inline: the CSP holds.
    path(
        "docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api/swagger_ui.html"),
        name="api-docs",
    ),
    path("v1/", include(v1_patterns)),
    re_path(r"^v1/", api_not_found),
]
