"""REST API for a memory's photos (`/api/v1/memories/{id}/photos/`, `/api/v1/photos/{id}/`).

For the owner only (an owner token or a signed-in session). Agent tokens get 404 here,
exactly as for a photo that does not exist: no agent ever receives a photo's bytes, its
URL or its metadata. What an agent may learn is how many photos a memory it may see
has (`photo_count` on the memory, memories/apis.py and the MCP tools).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_errors import VALIDATION_ERROR, error_response
from accounts.authentication import AgentTokensNotFound
from attachments import selectors, services
from attachments.forms import PhotosField
from attachments.images import FORMATS
from attachments.models import Attachment
from attachments.storage import attachment_storage
from config.api_inputs import validated
from config.api_views import api_base
from memories.selectors import memory_get

NOT_FOUND = error_response("Unknown memory or photo (or another owner's; agent tokens never see photos).")
VARIANTS = ("display", "thumbnail", "original")
ORIGINAL_MEDIA_TYPES = [media_type for media_type, _ in FORMATS.values()]


class PhotoOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    memory = serializers.UUIDField(source="memory_id")
    position = serializers.IntegerField()
    caption = serializers.CharField()
    media_type = serializers.CharField(help_text="Of the original, read from its bytes.")
    original_name = serializers.CharField(help_text="The uploaded file's name (its last part); owner only.")
    width = serializers.IntegerField(help_text="Of the upright display copy.")
    height = serializers.IntegerField(help_text="Of the upright display copy.")
    byte_size = serializers.IntegerField(help_text="Of the original.")
    sha256 = serializers.CharField(help_text="Of the original.")
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Photo"


# Every photo endpoint: the owner only (an agent token's answer is 404).
PhotoApi = api_base("PhotoApi", "photos", AgentTokensNotFound)


class MemoryPhotoListApi(PhotoApi):
    parser_classes = [MultiPartParser]

    class InputSerializer(serializers.Serializer):
        files = serializers.ListField(
            child=serializers.FileField(),
            allow_empty=False,
            help_text="One or more images (JPEG, PNG, WebP, HEIC), as repeated `files` parts. "
            "Checked by content; all are stored or none.",
        )
        captions = serializers.ListField(
            child=serializers.CharField(max_length=500, allow_blank=True),
            required=False,
            default=list,
            help_text="The owner's caption for each file, in order (the image's alt text).",
        )

    @extend_schema(
        operation_id="memory_photos_list", responses={200: PhotoOutputSerializer(many=True), 404: NOT_FOUND}
    )
    def get(self, request: Request, memory_id) -> Response:
        memory = memory_get(owner=request.user, memory_id=memory_id)
        photos = selectors.attachments_of_memory(memory_id=memory.pk)
        return Response(PhotoOutputSerializer(photos, many=True).data)

    @extend_schema(
        operation_id="memory_photos_add",
        request={"multipart/form-data": InputSerializer},
        responses={201: PhotoOutputSerializer(many=True), 400: VALIDATION_ERROR, 404: NOT_FOUND},
    )
    def post(self, request: Request, memory_id) -> Response:
        memory = memory_get(owner=request.user, memory_id=memory_id)
        data = {"files": request.FILES.getlist("files"), "captions": request.data.getlist("captions")}
        photos = validated(self.InputSerializer(data=data))
        try:
            images = PhotosField().clean(photos["files"])
        except ValidationError as error:
            raise ValidationError({"files": error.messages}) from error
        created = services.attachments_add(memory=memory, images=images, captions=photos["captions"])
        return Response(PhotoOutputSerializer(created, many=True).data, status=status.HTTP_201_CREATED)


class PhotoDetailApi(PhotoApi):
    class InputSerializer(serializers.Serializer):
        caption = serializers.CharField(max_length=500, allow_blank=True)

    def _photo(self, request: Request, photo_id) -> Attachment:
        return selectors.attachment_get_for_owner(owner=request.user, attachment_id=photo_id)

    @extend_schema(responses={200: PhotoOutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, photo_id) -> Response:
        return Response(PhotoOutputSerializer(self._photo(request, photo_id)).data)

    @extend_schema(
        request=InputSerializer, responses={200: PhotoOutputSerializer, 400: VALIDATION_ERROR, 404: NOT_FOUND}
    )
    def patch(self, request: Request, photo_id) -> Response:
        photo = self._photo(request, photo_id)
        caption = validated(self.InputSerializer(data=request.data))["caption"]
        photo = services.attachment_set_caption(attachment=photo, caption=caption)
        return Response(PhotoOutputSerializer(photo).data)

    @extend_schema(responses={204: None, 404: NOT_FOUND})
    def delete(self, request: Request, photo_id) -> Response:
        services.attachment_delete(attachment=self._photo(request, photo_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class PhotoFileApi(PhotoApi):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "variant",
                enum=list(VARIANTS),
                default="display",
                description="display: upright JPEG without metadata; thumbnail: the same, small; "
                "original: the bytes as uploaded (metadata and all), under their own name.",
            )
        ],
        responses={
            # display and thumbnail are JPEG; an original is what was uploaded.
            **{(200, media_type): OpenApiTypes.BINARY for media_type in ORIGINAL_MEDIA_TYPES},
            400: VALIDATION_ERROR,
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, photo_id):
        photo = selectors.attachment_get_for_owner(owner=request.user, attachment_id=photo_id)
        variant = request.query_params.get("variant", "display")
        if variant not in VARIANTS:
            raise ValidationError({"variant": f"Must be one of: {', '.join(VARIANTS)}."})
        try:
            handle = attachment_storage().open(getattr(photo, variant), "rb")
        except FileNotFoundError as missing:
            raise Http404 from missing
        if variant == "original":
            response = FileResponse(handle, as_attachment=True, filename=photo.original_name)
            response["Content-Type"] = photo.media_type
        else:
            response = FileResponse(handle, content_type="image/jpeg")
            response["Content-Disposition"] = 'inline; filename="photo.jpg"'
        response["Cache-Control"] = "private, no-store"
        return response
