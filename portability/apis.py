"""`GET /api/v1/export/`: everything the owner has, for owner tokens and sessions only."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api_errors import VALIDATION_ERROR, error_response
from accounts.authentication import OwnerOnly
from config.api_views import operation
from portability.selectors import export_filename, export_json, export_markdown_zip


class ExportApi(APIView):
    # An export is the owner's whole journal, ungated: never for an agent token.
    permission_classes = [*APIView.permission_classes, OwnerOnly]

    class InputSerializer(serializers.Serializer):
        archive = serializers.ChoiceField(choices=["json", "markdown"], default="json", required=False)

    @operation(
        "export",
        {
            (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT, description="The export."),
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="Markdown ZIP."),
            400: VALIDATION_ERROR,
            401: error_response("No or invalid credentials."),
            403: error_response("Agent tokens cannot export."),
        },
        parameters=[
            OpenApiParameter("archive", OpenApiTypes.STR, enum=["json", "markdown"], default="json"),
        ],
    )
    def get(self, request: Request) -> Response | HttpResponse:
        """Export everything the owner has (owner only)

        `archive=json` (default): one JSON document with `schema_version`, `exported_at`, people,
        consent_events, memories (with participants; no embedding vectors), edges, agents and `records`
        (every other model holding the owner's rows, e.g. access tokens without secrets).
        `archive=markdown`: a ZIP with one Markdown file per memory, YAML front matter first.
        """
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        if params.validated_data.get("archive", "json") == "markdown":
            filename = export_filename(owner=request.user, extension="zip")
            return HttpResponse(
                export_markdown_zip(owner=request.user),
                content_type="application/zip",
                headers={"Content-Disposition": f'attachment; filename="{filename}"'},
            )
        return Response(export_json(owner=request.user))
