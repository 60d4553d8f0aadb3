"""Keepsake settings: one module, driven by environment variables.

Every variable is documented in README.md. Without DATABASE_URL / REDIS_URL the
embedded development services under `.data/` are used (see config/embedded.py).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import environ
from celery.schedules import crontab
from redis.backoff import NoBackoff
from redis.retry import Retry

from config import embedded

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

# Off unless asked for: the debug page shows settings and environment to anyone
# who makes a request fail. KEEPSAKE_DEBUG=1 (or the older DEBUG=true) turns it on.
DEBUG = env.bool("KEEPSAKE_DEBUG", default=env.bool("DEBUG", default=False))
# Served over HTTPS (behind a TLS proxy in production): secure cookies, HSTS and
# the redirect to https. Off for `make run` on http://127.0.0.1.
HTTPS = env.bool("KEEPSAKE_HTTPS", default=False)
SECRET_KEY = env("SECRET_KEY", default="") or (
    "dev-only-insecure-secret-key" if DEBUG else embedded.local_secret_key()
)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django.contrib.admin",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "accounts",
    "people",
    "memories",
    "agents",
    "portability",
    "circles",
    "mail",
    "linked",
    "inbox",
    "axes",
    # Second factors: the authenticator-app (TOTP) device; accounts/two_factor.py uses it.
    "django_otp",
    "django_otp.plugins.otp_totp",
    "insights",
    "backups",
    "benchmarks",
    "attachments",
    "pwa",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before WhiteNoise, so static files carry the policy too.
    "config.security_headers.SecurityHeadersMiddleware",
    # A database or broker that cannot be reached answers a clear 503, never a 500.
    "config.unavailable.ServiceUnavailableMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Control characters out of every query string and form before any view (or CSRF)
    # reads them; unchecked input reaching the database answers 400, never 500.
    "config.input_edge.InputEdgeMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The Sessions page's record of each signed-in browser (last seen, at most once a minute).
    "accounts.middleware.SignedInSessionMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last: it answers a locked-out login attempt before the view runs.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "inbox.context_processors.inbox",
            ],
        },
    },
]

if env("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
else:
    DATABASES = {"default": embedded.database_settings()}
# Connections kept a minute: opening one per request (a PostgreSQL backend started and
# set up each time) cost 40% of the web server's throughput (bench_load: 35 requests/s at
# 0, 59 at 60, 2026-11-25).
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
# A kept connection is checked before each request reuses it: after the database
# restarts, the next request reconnects instead of failing on a dead socket.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A hybrid search runs its full-text side on a second connection, in a helper thread of
# the process, while the vector side runs on the request's own (memories/search/statements.py,
# _SideRunner): on a machine with cores to spare the two statements take the time of the
# slower one. Off (or on one core) both run one after the other.
SEARCH_SIDES_IN_PARALLEL = env.bool("KEEPSAKE_SEARCH_PARALLEL", default=(os.cpu_count() or 1) > 1)
# A search's transaction sends its BEGIN, settings and COMMIT with its statements (psycopg's
# pipeline mode; memories/search/statements.py, _SearchSettings): two round trips on the request's
# connection for an agent's hybrid search instead of five. Also off with
# DATABASE_PREPARED_STATEMENTS=false (behind a pooler).
SEARCH_PIPELINE = env.bool("KEEPSAKE_SEARCH_PIPELINE", default=True)
# Agents' searches over an owner with thousands of open memories beside many more gated ones
# rank a copy of the open vectors kept in the process (memories/open_vectors.py): at most
# this many rows per process (~1.5 KB each), all owners together; 0 keeps none.
SEARCH_OPEN_VECTORS_ROWS = env.int("KEEPSAKE_SEARCH_OPEN_VECTORS_ROWS", default=60_000)
DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_NAME", default="test_keepsake")}
# The search engine asks PostgreSQL to plan a few statements once per connection
# (memories/search/statements.py, _fetch_prepared): loading search results through a circle's gate
# was planned anew every search, ~1.1 ms. psycopg prepares only when a statement asks
# (Django's own cursors never do): the threshold is that "never by count". Off behind a
# pooler in transaction mode (PgBouncer before 1.21), where a prepared statement does not
# follow the connection.
if env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 2**31 - 1

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "accounts.password_validation.MaximumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Failed logins (django-axes): after AXES_FAILURE_LIMIT failures for one account
# from one address, further attempts at that account from that address answer 429
# with a clear page for the cool-off time. Counted per (username, address) pair, never
# per account alone: wrong passwords from one address must not lock the owner out
# from another (issue #40; SECURITY.md). The lock-out always ends on its own; a
# successful login clears the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# The username as recorded: NUL removed, at most the record's 255 characters (a longer
# one was a 500; no account's name is that long, so the prefix names no one else).
AXES_USERNAME_CALLABLE = "accounts.ratelimits.login_username"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "accounts/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
# Behind docker-compose's proxy the client address is X-Forwarded-For's first entry.
AXES_IPWARE_PROXY_COUNT = env.int("AXES_PROXY_COUNT", default=0)

# Two-factor sign-in and passkeys (accounts/two_factor.py, accounts/passkeys.py). The
# passkeys' relying party is this site's host name unless WEBAUTHN_RP_ID names one (a
# passkey made for one host name works only there); the origin is checked against the request's.
OTP_TOTP_ISSUER = env("OTP_TOTP_ISSUER", default="Keepsake")
WEBAUTHN_RP_ID = env("WEBAUTHN_RP_ID", default="")
WEBAUTHN_RP_NAME = env("WEBAUTHN_RP_NAME", default="Keepsake")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "timeline"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
# Uploads (people's photos). There is no MEDIA_URL: nothing here is served publicly;
# people.views.person_photo answers only the owner. Back this folder up with the database.
MEDIA_ROOT = Path(env("MEDIA_ROOT", default=str(BASE_DIR / ".data" / "media")))
# The production image runs collectstatic and serves hashed, compressed files
# (KEEPSAKE_STATIC_MANIFEST=true in the Dockerfile); elsewhere WhiteNoise serves
# the app's static folders directly, so `make run` needs no collectstatic.
STATIC_MANIFEST = env.bool("KEEPSAKE_STATIC_MANIFEST", default=False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if STATIC_MANIFEST
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not STATIC_MANIFEST
# Photos in memories (attachments/): never at a URL of the store's own; every byte goes
# through attachments.views, which asks the gate. The filesystem under MEDIA_ROOT/attachments
# by default; KEEPSAKE_ATTACHMENTS_STORAGE=s3 keeps them in an S3-compatible bucket
# (django-storages; private objects, no public URLs), see docs/operations.md.


def _s3_bucket_required() -> str:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("KEEPSAKE_ATTACHMENTS_STORAGE=s3 needs KEEPSAKE_S3_BUCKET.")


if env("KEEPSAKE_ATTACHMENTS_STORAGE", default="filesystem") == "s3":
    STORAGES["attachments"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env("KEEPSAKE_S3_BUCKET", default="") or _s3_bucket_required(),
            "endpoint_url": env("KEEPSAKE_S3_ENDPOINT_URL", default="") or None,
            "region_name": env("KEEPSAKE_S3_REGION", default="") or None,
            "access_key": env("KEEPSAKE_S3_ACCESS_KEY", default="") or None,
            "secret_key": env("KEEPSAKE_S3_SECRET_KEY", default="") or None,
            "location": env("KEEPSAKE_S3_PREFIX", default="attachments"),
            "default_acl": "private",
            "file_overwrite": False,
            "querystring_auth": True,
        },
    }
else:
    STORAGES["attachments"] = {"BACKEND": "attachments.storage.AttachmentFileSystemStorage"}
# Limits on what one upload and one memory may hold (attachments/images.py).
ATTACHMENT_MAX_BYTES = env.int("KEEPSAKE_ATTACHMENT_MAX_BYTES", default=25 * 1024 * 1024)
ATTACHMENT_MAX_PIXELS = env.int("KEEPSAKE_ATTACHMENT_MAX_PIXELS", default=60_000_000)
ATTACHMENTS_PER_MEMORY = env.int("KEEPSAKE_ATTACHMENTS_PER_MEMORY", default=12)

SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if HTTPS:
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    # Only allows submitting the domain to browsers' preload list; submitting is the owner's act.
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)

# --- REST API -----------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Bearer first: an anonymous API call then answers 401 with a Bearer challenge.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["config.api_inputs.DepthLimitedJSONParser"],
    "EXCEPTION_HANDLER": "accounts.api_errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Keepsake API",
    "DESCRIPTION": "Personal memory journal with consent management. Agent tokens only ever see "
    "memories whose every participant has consented.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI assets come from drf-spectacular-sidecar: the docs work offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "accounts.api_errors.document_authentication_errors",
    ],
    # One named enum per choice set, shared by every field that uses it.
    "ENUM_NAME_OVERRIDES": {
        "ConsentStatusEnum": "people.models.ConsentStatus",
        "PersonKindEnum": "people.models.PersonKind",
        "MemoryKindEnum": "memories.models.MemoryKind",
        "ParticipantRoleEnum": "memories.models.ParticipantRole",
        "AgentRoleEnum": "agents.models.AgentRole",
        "TokenKindEnum": "accounts.models.TokenKind",
        "MembershipRoleEnum": "circles.models.MembershipRole",
        "JoinRequestStatusEnum": "circles.models.JoinRequestStatus",
    },
}

# --- Celery -----------------------------------------------------------------
REDIS_URL = env("REDIS_URL", default="") or embedded.valkey_url()
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
# Saving a memory must never fail or hang because the broker is down.
CELERY_BROKER_CONNECTION_TIMEOUT = 2
# A task is acknowledged once it has run (acks_late). If the whole worker dies
# with tasks in hand (killed, the machine lost), the broker hands them out again
# after they have gone unacknowledged this long, so it must be longer than any
# task may run or wait for its retry (the nightly backup: up to an hour). A
# worker that loses only its pool process requeues the task at once
# (reject_on_worker_lost), and an interrupted import can always be resumed by hand.
CELERY_VISIBILITY_TIMEOUT = env.int("CELERY_VISIBILITY_TIMEOUT", default=2 * 3600)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    # A broker that accepts the connection but never answers (frozen, overloaded)
    # must not hang a save: publishing gives up after this many seconds.
    "socket_timeout": 5,
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
    # Workers look for such orphaned tasks every 1-10 s (a cheap sorted-set read).
    "unacked_restore_interval": min(10, max(1, CELERY_VISIBILITY_TIMEOUT // 20)),
    "unacked_restore_throttle": 1,
}
CELERY_TASK_PUBLISH_RETRY = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
# Lets a test worker (tests/memories/test_worker.py) keep to a queue of its own.
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_TASK_DEFAULT_QUEUE", default="celery")

# --- Rate limits (accounts/ratelimits.py; logins are django-axes', above) ------
# django-ratelimit counts in Valkey, shared by every worker. Each limit is
# "count/period" (s, m, h, d; "15m" is fifteen minutes), a fixed window that ends
# on its own; an empty value switches that limit off. If Valkey cannot be reached
# the limits step aside (and log it) rather than refuse everyone.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "ratelimit": {
        "BACKEND": "config.cache.RedisCache",
        "LOCATION": env("RATELIMIT_CACHE_URL", default="") or REDIS_URL,
        "KEY_PREFIX": "keepsake",
        # Fail fast when Valkey is down: one quick retry, never a back-off per request.
        "OPTIONS": {
            "socket_connect_timeout": 0.5,
            "socket_timeout": 0.5,
            "retry": Retry(NoBackoff(), 1),
        },
    },
}
RATELIMIT_USE_CACHE = "ratelimit"
RATELIMIT_FAIL_OPEN = True
RATELIMIT_IP_META_KEY = "accounts.ratelimits.client_address"
KEEPSAKE_RATELIMITS = {
    # Wrong, malformed or revoked bearer tokens (API and /mcp/) from one address.
    "token_failures_per_address": env("RATELIMIT_TOKEN_FAILURES", default="30/15m"),
    # Authenticated requests made with all of one account's tokens together.
    "token_requests_per_account": env("RATELIMIT_TOKEN_REQUESTS", default="6000/m"),
    # Sign-up form posts from one address.
    "signup_per_address": env("RATELIMIT_SIGNUP", default="10/h"),
    # Wrong current passwords on the password-change form.
    "password_change_failures_per_account": env("RATELIMIT_PASSWORD_CHANGE_ACCOUNT", default="5/15m"),
    "password_change_failures_per_address": env("RATELIMIT_PASSWORD_CHANGE_ADDRESS", default="20/15m"),
}

# --- Embeddings and edges (memories/tasks.py) --------------------------------
# Outgoing `similar` edges per memory, and the cosine similarity they need.
MEMORY_EDGES_SIMILAR_LIMIT = env.int("MEMORY_EDGES_SIMILAR_LIMIT", default=5)
MEMORY_EDGES_SIMILAR_MIN_SIMILARITY = env.float("MEMORY_EDGES_SIMILAR_MIN_SIMILARITY", default=0.5)
MEMORY_EDGES_SHARED_PERSON_LIMIT = env.int("MEMORY_EDGES_SHARED_PERSON_LIMIT", default=10)
# A claim older than this (seconds) belongs to a dead worker: longer than the task's hard time limit.
MEMORY_EMBEDDING_CLAIM_TIMEOUT = env.int("MEMORY_EMBEDDING_CLAIM_TIMEOUT", default=600)
MEMORY_SWEEP_INTERVAL = env.int("MEMORY_SWEEP_INTERVAL", default=60)
MEMORY_SWEEP_GRACE = env.int("MEMORY_SWEEP_GRACE", default=30)
MEMORY_SWEEP_BATCH_SIZE = env.int("MEMORY_SWEEP_BATCH_SIZE", default=128)
MEMORY_SWEEP_MAX_MEMORIES = env.int("MEMORY_SWEEP_MAX_MEMORIES", default=2048)
# Bulk embedding (after an import, and the sweep's catching up) has a queue of its
# own (config/celery.py), so it never holds up a memory just saved. One bulk task
# embeds up to this many memories, then queues their edges in smaller groups: a
# worker is never busy with one bulk task for more than a second or two.
# A worker kept to a queue of its own (CELERY_TASK_DEFAULT_QUEUE, e.g. in tests) gets
# the bulk work there too, unless this names another.
MEMORY_EMBEDDINGS_BULK_QUEUE = env(
    "MEMORY_EMBEDDINGS_BULK_QUEUE",
    default="embeddings_bulk" if CELERY_TASK_DEFAULT_QUEUE == "celery" else CELERY_TASK_DEFAULT_QUEUE,
)
MEMORY_EMBEDDINGS_BULK_BATCH_SIZE = env.int("MEMORY_EMBEDDINGS_BULK_BATCH_SIZE", default=64)
# Edges are computed a batch at a time in a few statements (memory_edges_refresh_batch):
# 64 at once cost ~2.7 ms a memory against ~4.3 ms 16 at once (2026-11-28, bench_import).
MEMORY_EDGES_BULK_BATCH_SIZE = env.int("MEMORY_EDGES_BULK_BATCH_SIZE", default=64)
CELERY_BEAT_SCHEDULE: dict = {
    "memories-sweep": {"task": "memories.sweep", "schedule": float(MEMORY_SWEEP_INTERVAL)},
    # Gate rows a grant opened go into the agents' vector index off the request
    # (memories/gate_index.py); the grant queues that itself, this catches a lost publish.
    "memories-index-opened-gates": {
        "task": "memories.index_opened_gates",
        "schedule": float(MEMORY_SWEEP_INTERVAL),
        "options": {"queue": MEMORY_EMBEDDINGS_BULK_QUEUE, "expires": MEMORY_SWEEP_INTERVAL * 2},
    },
    # Which transactions changed owners' open gate rows (memories/open_vectors.py): rows of
    # ended transactions go once no copy of the open vectors a web process keeps can need them.
    "memories-gate-changes-prune": {"task": "memories.gate_changes_prune", "schedule": 300.0},
}

# --- Memory lifecycle (memories/lifecycle.py) --------------------------------
# Days after occurred_at until a memory of that kind leaves agent retrieval; None = never.
# Override some kinds from the environment, e.g. MEMORY_KIND_LIFETIMES="event=60,task=never".
MEMORY_KIND_LIFETIMES: dict[str, float | str | None] = {
    "preference": None,
    "identity": None,
    "relationship": None,
    "knowledge": None,
    "context": 7,
    "event": 30,
    "task": 14,
    "observation": 3,
} | env.dict("MEMORY_KIND_LIFETIMES", default={})
# Cosine similarity above which the worker proposes "the newer memory replaces the older".
SUPERSESSION_MIN_SIMILARITY = env.float("SUPERSESSION_MIN_SIMILARITY", default=0.6)
# Seconds between the beat runs that mark expired memories and look for replacements.
MEMORY_EXPIRY_INTERVAL = env.int("MEMORY_EXPIRY_INTERVAL", default=300)
SUPERSESSION_SWEEP_INTERVAL = env.int("SUPERSESSION_SWEEP_INTERVAL", default=300)
CELERY_BEAT_SCHEDULE |= {
    "memories-mark-expired": {"task": "memories.mark_expired", "schedule": float(MEMORY_EXPIRY_INTERVAL)},
    "memories-supersession-sweep": {
        "task": "memories.supersession_sweep",
        "schedule": float(SUPERSESSION_SWEEP_INTERVAL),
    },
}

# --- Agent chat LLM (agents/llm.py) -------------------------------------------
# Any OpenAI-compatible chat-completions server: "<LLM_BASE_URL>/chat/completions".
# Empty LLM_BASE_URL: the built-in offline responder answers from the memories instead.
LLM_BASE_URL = env("LLM_BASE_URL", default="")
LLM_API_KEY = env("LLM_API_KEY", default="")
LLM_MODEL = env("LLM_MODEL", default="gpt-4o-mini")
# Seconds to wait for the server (connect, and each read); a slow local model needs more.
LLM_TIMEOUT = env.float("LLM_TIMEOUT", default=60.0)
# With an LLM configured and this on, a kind left to Keepsake is also asked of the LLM (the
# memory's text is sent to it) after the rules' answer is saved. Off by default; even on, a
# sensitive memory or one hidden from agents is never sent (memories/kind_inference.py).
MEMORY_KIND_LLM = env.bool("MEMORY_KIND_LLM", default=False)
# How many consent-gated memories one chat turn hands to the agent.
AGENT_CHAT_MEMORY_LIMIT = env.int("AGENT_CHAT_MEMORY_LIMIT", default=8)

# --- Relevance cut-off (memories/search/fusion.py RelevanceCutoff) ------------------
# Search and agents return only memories relevant to the query, so "nothing matches"
# can be the answer. Cosine similarities of all-MiniLM-L6-v2 (query to memory);
# calibrated with `python manage.py bench_relevance` on benchmarks/data/relevance_set.json.
# Meaning alone is enough at or above this (searches and agents' questions):
RELEVANCE_MIN_SIMILARITY = env.float("RELEVANCE_MIN_SIMILARITY", default=0.35)
# An agent's question is matched word by word (ORed): a memory sharing a word needs at
# least this much meaning too (a search's words are all required, so any match counts).
RELEVANCE_QUESTION_MIN_TEXT_SIMILARITY = env.float("RELEVANCE_QUESTION_MIN_TEXT_SIMILARITY", default=0.25)
# An agent gets only memories within this much similarity of the question's best match.
RELEVANCE_QUESTION_MARGIN = env.float("RELEVANCE_QUESTION_MARGIN", default=0.10)

# --- Import (portability/) ----------------------------------------------------
# Largest import file accepted (bytes, also checked after unzipping).
KEEPSAKE_IMPORT_MAX_BYTES = env.int("KEEPSAKE_IMPORT_MAX_BYTES", default=50 * 1024 * 1024)
# Seconds one import task works before it queues its own continuation (portability/tasks.py).
KEEPSAKE_IMPORT_RUN_SECONDS = env.float("KEEPSAKE_IMPORT_RUN_SECONDS", default=60.0)

# --- Backups (backups/) --------------------------------------------------------
# Where `manage.py backup` and the nightly beat task write dumps and manifests, and how
# many backups of each database to keep (older ones are deleted after each backup).
KEEPSAKE_BACKUP_DIR = Path(env("KEEPSAKE_BACKUP_DIR", default=str(embedded.DATA_DIR / "backups")))
KEEPSAKE_BACKUP_KEEP = env.int("KEEPSAKE_BACKUP_KEEP", default=7)
CELERY_BEAT_SCHEDULE |= {
    # 03:00 in Celery's time zone (UTC: no CELERY_TIMEZONE is set).
    "backups-nightly": {"task": "backups.nightly", "schedule": crontab(hour=3, minute=0)},
}

# --- E-mail (mail/) --------------------------------------------------------------
# Sent only by the worker (mail.tasks.send), never inside a request. EMAIL_URL sets it all
# at once (smtp://user:password@host:587 with STARTTLS: smtp+tls://…, implicit TLS:
# smtp+ssl://…); or EMAIL_HOST and the parts below. With neither, messages are printed
# by the worker (the console backend): nothing leaves the machine in development.
if env("EMAIL_URL", default=""):
    vars().update(env.email_url("EMAIL_URL"))
else:
    EMAIL_HOST = env("EMAIL_HOST", default="")
    EMAIL_BACKEND = (
        "django.core.mail.backends.smtp.EmailBackend"
        if EMAIL_HOST
        else "django.core.mail.backends.console.EmailBackend"
    )
    EMAIL_PORT = env.int("EMAIL_PORT", default=587)
    EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
    EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
    EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=EMAIL_PORT == 587)
    EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=EMAIL_PORT == 465)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=20)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="Keepsake <keepsake@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# Links in messages the worker writes on its own (the digest); others use the request's address.
KEEPSAKE_BASE_URL = env("KEEPSAKE_BASE_URL", default="http://127.0.0.1:8000")
# A refused or failed send is retried after MAIL_RETRY_BACKOFF seconds, doubling up to the max.
MAIL_SEND_MAX_RETRIES = env.int("MAIL_SEND_MAX_RETRIES", default=8)
MAIL_RETRY_BACKOFF = env.int("MAIL_RETRY_BACKOFF", default=30)
MAIL_RETRY_BACKOFF_MAX = env.int("MAIL_RETRY_BACKOFF_MAX", default=3600)
# A queued message whose publish was lost (broker down) is queued again after this many seconds.
MAIL_SWEEP_GRACE = env.int("MAIL_SWEEP_GRACE", default=60)
# The daily digest goes out from this hour (TIME_ZONE), at most once a day per account.
MAIL_DIGEST_HOUR = env.int("MAIL_DIGEST_HOUR", default=7)
# "Forgot password?" form posts from one address (accounts/ratelimits.py's kind of limit).
KEEPSAKE_RATELIMITS["password_reset_per_address"] = env("RATELIMIT_PASSWORD_RESET", default="10/h")
# Invitations and verification links one account asks for (to addresses it types).
KEEPSAKE_RATELIMITS["mail_per_account"] = env("RATELIMIT_MAIL", default="50/d")
CELERY_BEAT_SCHEDULE |= {
    "mail-sweep": {"task": "mail.sweep", "schedule": 60.0},
    "mail-digests": {"task": "mail.digests", "schedule": 900.0},
}

# --- Logging ----------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    # Django's own default config also prints to the console: log each line once.
    "loggers": {"django": {"handlers": ["console"], "level": "INFO", "propagate": False}},
}

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
