"""Where photos live: the filesystem under MEDIA_ROOT by default (never at a URL), an S3-compatible
bucket through django-storages when KEEPSAKE_ATTACHMENTS_STORAGE=s3 (docker-compose passes it on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attachments.storage import AttachmentFileSystemStorage, attachment_storage

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_store_is_under_media_root_and_has_no_url(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    storage = attachment_storage()
    assert isinstance(storage, AttachmentFileSystemStorage)
    assert Path(storage.location) == tmp_path / "media" / "attachments"
    with pytest.raises(NotImplementedError):
        storage.url("1/abc/original.jpg")
    assert not str(storage.location).startswith(str(ROOT / "static"))


def _settings_with(extra: dict) -> subprocess.CompletedProcess:
    code = (
        "import django, json; django.setup(); "
        "from attachments.storage import attachment_storage as s; x = s(); "
        "print(json.dumps([type(x).__module__ + '.' + type(x).__name__, getattr(x, 'bucket_name', None), "
        "getattr(x, 'endpoint_url', None), getattr(x, 'default_acl', None), "
        "getattr(x, 'querystring_auth', None), getattr(x, 'location', None)]))"
    )
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **extra}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def test_the_s3_switch_gives_a_private_bucket_through_django_storages():
    result = _settings_with(
        {
            "KEEPSAKE_ATTACHMENTS_STORAGE": "s3",
            "KEEPSAKE_S3_BUCKET": "keepsake-photos",
            "KEEPSAKE_S3_ENDPOINT_URL": "http://minio:9000",
        }
    )
    assert result.returncode == 0, result.stderr
    backend, bucket, endpoint, acl, signed, prefix = json.loads(result.stdout.strip().splitlines()[-1])
    assert backend == "storages.backends.s3.S3Storage"
    assert (bucket, endpoint, acl, signed, prefix) == (
        "keepsake-photos",
        "http://minio:9000",
        "private",
        True,
        "attachments",
    )


def test_the_s3_switch_without_a_bucket_is_refused_at_start():
    result = _settings_with({"KEEPSAKE_ATTACHMENTS_STORAGE": "s3", "KEEPSAKE_S3_BUCKET": ""})
    assert result.returncode != 0
    assert "needs KEEPSAKE_S3_BUCKET" in result.stderr


def test_compose_passes_the_photo_store_settings_on():
    environment = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["x-app-environment"]
    assert environment["KEEPSAKE_ATTACHMENTS_STORAGE"] == "${KEEPSAKE_ATTACHMENTS_STORAGE:-filesystem}"
    for name in ("BUCKET", "ENDPOINT_URL", "REGION", "ACCESS_KEY", "SECRET_KEY"):
        assert f"KEEPSAKE_S3_{name}" in environment
