"""docker-compose.yml cannot run here (no Docker engine): check its shape instead."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _command(service: dict) -> str:
    command = service["command"]
    return command if isinstance(command, str) else " ".join(command)


def test_compose_has_the_production_services():
    services = _compose()["services"]
    assert set(services) == {"db", "redis", "web", "worker", "beat"}
    assert services["db"]["image"] == "pgvector/pgvector:pg17"
    assert services["redis"]["image"].startswith("redis:7")


def test_app_services_share_the_image_and_environment():
    services = _compose()["services"]
    for name in ("web", "worker", "beat"):
        service = services[name]
        assert service["build"] == "."
        environment = service["environment"]
        assert environment["DATABASE_URL"].startswith("postgres://keepsake:")
        assert environment["DATABASE_URL"].endswith("@db:5432/keepsake")
        assert environment["REDIS_URL"] == "redis://redis:6379/0"
        assert environment["DEBUG"] == "false"
        assert "SECRET_KEY" in environment
        assert service["depends_on"]["db"]["condition"] == "service_healthy"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"


def test_app_service_commands():
    services = _compose()["services"]
    assert "migrate" in _command(services["web"])
    assert "gunicorn config.wsgi:application" in _command(services["web"])
    assert _command(services["worker"]).startswith("celery -A config worker")
    assert _command(services["beat"]).startswith("celery -A config beat")
    assert "8000:8000" in services["web"]["ports"]


def test_data_lives_in_volumes():
    compose = _compose()
    assert {"pgdata", "redisdata"} <= set(compose["volumes"])
    assert "pgdata:/var/lib/postgresql/data" in compose["services"]["db"]["volumes"]


def test_dockerfile_installs_requirements_and_serves_with_gunicorn():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --no-cache-dir -r requirements.txt" in dockerfile
    assert "collectstatic" in dockerfile
    assert "gunicorn" in dockerfile
    assert (ROOT / "requirements.txt").read_text().count("gunicorn==") == 1


def test_check_deploy_is_clean_for_the_documented_production_settings():
    """`manage.py check --deploy` with docker-compose's environment (and the image's) finds nothing."""
    import os
    import secrets
    import subprocess
    import sys

    compose = _compose()
    environment = dict(os.environ)
    for key, value in compose["x-app-environment"].items():
        if "${" not in str(value):
            environment[key] = str(value)
    environment.update(
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="keepsake.example.org",
        KEEPSAKE_HTTPS="true",  # the compose default
        KEEPSAKE_STATIC_MANIFEST="true",  # set by the Dockerfile
    )
    assert compose["x-app-environment"]["KEEPSAKE_HTTPS"] == "${KEEPSAKE_HTTPS:-true}"
    assert "KEEPSAKE_STATIC_MANIFEST=true" in (ROOT / "Dockerfile").read_text()
    environment.pop("DATABASE_URL", None)  # no db host here: the embedded server stands in
    # Set by the browser tests' conftest in this process; never in production.
    environment.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_debug_is_off_unless_asked_for():
    import os
    import subprocess
    import sys

    code = "from django.conf import settings; print(settings.DEBUG)"
    for extra, expected in [({}, "False"), ({"KEEPSAKE_DEBUG": "1"}, "True")]:
        environment = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "KEEPSAKE_DEBUG")}
        environment.update(extra, DJANGO_SETTINGS_MODULE="config.settings")
        result = subprocess.run(
            [sys.executable, "-c", f"import django; django.setup(); {code}"],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.stdout.strip().splitlines()[-1] == expected, result.stderr


def test_compose_keeps_photos_and_backups_in_volumes_the_app_user_can_write():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert compose["x-app-environment"]["MEDIA_ROOT"] == "/media"
    for name in ("web", "worker"):
        assert "media:/media" in services[name]["volumes"], name
    assert {"media", "backups"} <= set(compose["volumes"])
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "chown keepsake:keepsake /backups /media" in dockerfile
    assert dockerfile.index("chown keepsake") < dockerfile.index("USER keepsake")


def test_the_image_builds_the_front_end_libraries_from_npm_before_collecting_static_files():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "FROM node:20-slim AS vendor" in dockerfile
    assert "npm ci" in dockerfile
    copied = dockerfile.index("COPY --from=vendor /vendor/static/vendor/ static/vendor/")
    assert copied < dockerfile.index("collectstatic")
    # The same files `make vendor` serves locally.
    makefile = (ROOT / "Makefile").read_text()
    assert "cytoscape/dist/cytoscape.min.js static/vendor/cytoscape.min.js" in makefile
    assert "cytoscape/dist/cytoscape.min.js static/vendor/cytoscape.min.js" in dockerfile
    assert "node_modules" in (ROOT / ".dockerignore").read_text()
