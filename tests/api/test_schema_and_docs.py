from __future__ import annotations

import re

import yaml
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client


def test_schema_is_valid_openapi_3_and_generates_without_warnings(tmp_path) -> None:
    out = tmp_path / "schema.yaml"

    # --fail-on-warn turns any spectacular warning (unresolvable type, name clash) into an error.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))

    schema = yaml.safe_load(out.read_text())
    assert schema["openapi"].startswith("3.")
    bearer = schema["components"]["securitySchemes"]["bearerAuth"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    for path in [
        "/api/v1/people/",
        "/api/v1/people/{person_id}/consent/",
        "/api/v1/memories/search/",
        "/api/v1/memories/{memory_id}/similar/",
        "/api/v1/tokens/{token_id}/revoke/",
    ]:
        assert path in schema["paths"]
    search = schema["paths"]["/api/v1/memories/search/"]["get"]
    assert {p["name"] for p in search["parameters"]} >= {"q", "limit", "respect_consent"}
    assert set(search["responses"]) >= {"200", "400", "401"}


def test_schema_endpoint_serves_yaml_and_json_without_login(db) -> None:
    yaml_response = Client().get("/api/schema/")
    json_response = Client().get("/api/schema/", {"format": "json"})

    assert yaml_response.status_code == json_response.status_code == 200
    assert "/api/v1/memories/" in json_response.json()["paths"]
    assert yaml.safe_load(yaml_response.content)["info"]["title"] == "Keepsake API"


def test_swagger_ui_loads_its_assets_locally_not_from_a_cdn(db) -> None:
    response = Client().get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', html)
    assert assets, html
    assert all(asset.startswith("/static/") for asset in assets), assets
    assert "cdn" not in html.lower()
    for asset in assets:
        assert finders.find(asset.removeprefix("/static/")), f"missing static file {asset}"
