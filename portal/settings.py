"""Settings, all read from the environment (django-environ).

The defaults give the embedded stack: SQLite and kombu's filesystem broker under ``var/``,
and the Azure clients pointed at the local emulator (cloudsim) on 127.0.0.1. Production sets
DATABASE_URL, CELERY_BROKER_URL, SECRET_KEY, ALLOWED_HOSTS, the HTTPS settings and the AZURE_*
variables; docs/operations.md lists them. A deployment with an unsafe SECRET_KEY refuses to start
(portal/secret_key.py); one that talks to Azure without DATABASE_URL, CELERY_BROKER_URL,
ALLOWED_HOSTS, CACHE_URL or AZURE_SUBSCRIPTION_ID refuses to start too, naming them
(portal/required_settings.py).
"""

import os
from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from portal.logs import logger_levels, logging_config
from portal.password_login import password_login
from portal.required_settings import (
    metrics_token_sha256,
    require_production_settings,
    webhook_allow_loopback,
)
from portal.secret_key import KEY_FILE as SECRET_KEY_FILE
from portal.secret_key import entra_client_secret, is_embedded, secret_key
from portal.sentry import sentry_init
from portal.var_dir import var_dir_make_private

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)
# Run-time files of the embedded default: SQLite database, filesystem broker, static files.
VAR_DIR = Path(env.str("PORTAL_VAR_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "rules.apps.AutodiscoverRulesConfig",
    "axes",
    "django_filters",
    "common",
    "notifications",
    "teams",
    "environments",
    "bookings",
    "workspaces",
    "billing",
    "storage",
    "clusters",
    "scheduling",
    "live",
    "apps_proxy",
    "api",
]

MIDDLEWARE = [
    # First, so that the latency it records (per view, /metrics) covers every other middleware.
    "portal.middleware.RequestMetricsMiddleware",
    # Before the rest: every later middleware's and view's log lines carry the request id.
    "common.request_id.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # The Content-Security-Policy header on every answer (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "portal.middleware.UserTimezoneMiddleware",
    # Last, as django-axes asks: it turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# django-axes first (refuses a login during a lockout before any password is checked), the
# PASSWORD_LOGIN switch, then object permissions from django-rules (each app's rules.py), then
# Django's own.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Refuses passwords before ModelBackend sees them while PASSWORD_LOGIN is off.
    "teams.backends.PasswordLoginSwitch",
    "rules.permissions.ObjectPermissionBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

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
                "notifications.context_processors.notices",
                "workspaces.context_processors.demo_timings",
            ],
            # The one money filter, time tag and labels, in every template (no {% load %}).
            "builtins": ["common.templatetags.display"],
        },
    },
]

# Bootstrap 5 classes on every form field (common/forms.py).
FORM_RENDERER = "common.forms.BootstrapFormRenderer"

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"),
}

# Shared by every web and worker process: the idle sweep (a worker) reads there when a web
# process last failed to store telemetry. Files under var/ for the embedded stack, all on one
# host; production: redis://…, e.g. the broker's Redis with another database number.
CACHES = {"default": env.cache("CACHE_URL", default=f"filecache://{VAR_DIR / 'cache'}")}
DATABASES["default"].setdefault("TEST", {})
# Seconds a connection is reused: a worker's task then skips the connect (tens of ms on a server).
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not :memory:, so a live server, a Celery worker thread and the tests see one database.
    DATABASES["default"]["TEST"]["NAME"] = str(VAR_DIR / "test.sqlite3")
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    # TelemetryHour's covering index INCLUDEs columns for PostgreSQL's index-only scans; SQLite
    # ignores them and its index still serves the lookups, so the warning (on every command
    # of the embedded default) says nothing to act on.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "workspaces:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
USE_I18N = False
USE_TZ = True
TIME_ZONE = "UTC"
# Shown times use the user's zone (browser cookie ``tz``), falling back to this one.
PORTAL_DISPLAY_TIME_ZONE = env.str("PORTAL_DISPLAY_TIME_ZONE", default="UTC")

STATIC_URL = "static/"
# The container image collects static files at build into a read-only folder outside
# PORTAL_VAR_DIR (Containerfile), so the writable var/ can be an empty volume.
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(VAR_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="portal@localhost")

# --- HTTPS, cookies, sessions --------------------------------------------------------------
# Off by default so that the embedded stack answers on http://127.0.0.1; production behind a TLS
# proxy turns them on (docs/operations.md, "Configuration (production)"), and `check --deploy`
# is then clean.
SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
# A load balancer's health probe may speak plain HTTP to the web process.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
# "HTTP_X_FORWARDED_PROTO,https": the header the TLS proxy sets and that clients cannot pass
# through it. Only then does Django know a request came over HTTPS.
_proxy_ssl_header = env.list("SECURE_PROXY_SSL_HEADER", default=[])
SECURE_PROXY_SSL_HEADER = tuple(_proxy_ssl_header) if _proxy_ssl_header else None
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp, its middleware above; docs/operations.md, "Content
# Security Policy"): scripts, styles, fonts and fetches from the portal's own origin only, no
# inline script or style, no eval, no plugins, no framing, forms posting back to the portal.
# Every template and static script is written for it (no inline <script>, style="" or on*=
# handlers; htmx's injected indicator style is off, its rules are in portal.css); the browser
# tests fail on any violation. img-src allows data: for Bootstrap's and Swagger UI's icons.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}
# Seconds a login lasts, counted from the login (a working day with margin), and the cookie
# is dropped when the browser closes: a shared or lost laptop does not stay logged in.
SESSION_COOKIE_AGE = env.int("SESSION_COOKIE_AGE", default=12 * 3600)
SESSION_EXPIRE_AT_BROWSER_CLOSE = env.bool("SESSION_EXPIRE_AT_BROWSER_CLOSE", default=True)

# Structured logs (portal/logs.py): "json", one object a line with request_id, workspace_id and
# azure_correlation_id where known, the default; "console", readable lines (`make run` sets it).
LOG_FORMAT = env.str("LOG_FORMAT", default="json")
# LOG_LEVELS: levels of named loggers, "logger=LEVEL,..." (`make run` quietens Celery's line per
# task and beat's per schedule entry: docs/operations.md, "Logs").
LOGGING = logging_config(
    log_format=LOG_FORMAT,
    level=env.str("LOG_LEVEL", default="INFO"),
    levels=logger_levels(env.str("LOG_LEVELS", default="")),
)
# Errors to Sentry when set (portal/sentry.py; no personal data is sent).
SENTRY_DSN = env.str("SENTRY_DSN", default="")
sentry_init(
    dsn=SENTRY_DSN,
    environment=env.str("SENTRY_ENVIRONMENT", default="production"),
    traces_sample_rate=env.float("SENTRY_TRACES_SAMPLE_RATE", default=0.0),
)

PORTAL_PORT = env.int("PORTAL_PORT", default=8000)
# The portal's own address, as workspaces' agents reach it.
PORTAL_URL = env.str("PORTAL_URL", default=f"http://127.0.0.1:{PORTAL_PORT}")

# --- Workspace apps (apps_proxy; docs/apps.md) --------------------------------------------------
# JupyterLab and shared ports are served from <label>.APPS_DOMAIN by the app proxy (a process of
# its own: `uvicorn apps_proxy.asgi:application`), never from the portal's origin: what a
# workspace serves is its user's code. Production: a wildcard DNS name and certificate on a
# registrable domain of its own (not a subdomain of the portal's). The demo: *.apps.localhost,
# which browsers resolve to loopback without DNS.
APPS_DOMAIN = env.str("APPS_DOMAIN", default="apps.localhost")
APPS_URL_SCHEME = env.str("APPS_URL_SCHEME", default="http")
APPS_PORT = env.int("APPS_PORT", default=8200)  # 0: the scheme's own port (behind a balancer).
# Where a workspace address (a VM's private IP, a Service's DNS name) is asked to go: empty in
# production, where the proxy connects to it in the VNet; the emulator's route table in the demo
# and tests (cloudsim /_sim/routes/resolve).
WORKSPACE_ROUTE_RESOLVER = env.str("WORKSPACE_ROUTE_RESOLVER", default="")

# --- Login throttling (django-axes; portal/login_throttle.py) ---------------------------------
# Failed logins that lock one account, from any address, for the cool-off.
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
# Failed logins, over all accounts, that lock one client address (higher: a campus NAT or VPN
# puts many researchers behind one address).
LOGIN_IP_FAILURE_LIMIT = env.int("LOGIN_IP_FAILURE_LIMIT", default=20)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_HANDLER = "portal.login_throttle.LoginThrottleHandler"
# A successful login forgets that account's failures from that address (and nothing else).
AXES_RESET_ON_SUCCESS = True
# Attempts during a lockout neither count nor prolong it: "try again in 15 minutes" holds.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "portal.login_throttle.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429
# Reverse proxies in front of gunicorn that append the client's address to X-Forwarded-For
# (1 behind one nginx); 0 takes REMOTE_ADDR. Too high lets clients pick their address. The
# login lockout and the heartbeat limits both count by it (common/client_address.py).
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
AXES_CLIENT_IP_CALLABLE = "portal.login_throttle.client_ip"
# The lockouts have the portal's own admin page (teams/admin.py), open to platform admins,
# whose unlock is audited; successful logins are not kept (no retention rule for them).
AXES_ENABLE_ADMIN = False
AXES_DISABLE_ACCESS_LOG = True
# Masked in the failed attempts' stored POST data (axes always masks the password).
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "csrfmiddlewaretoken"]

# --- Celery -------------------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    # kombu's filesystem transport fails on a missing folder; web, worker and tests all need it.
    for _sub in ("out", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # Seconds between looks at the folder: the latency of the embedded default.
        "polling_interval": 0.1,
    }
    # kombu warns "No hostname was supplied" at every connection to a URL without a host, as
    # filesystem:// is by design: each process's start, each task, each /healthz.
    LOGGING["loggers"].setdefault("kombu.connection", {"level": "ERROR"})
else:
    # Seconds before an unacknowledged task (its worker died) is handed to another worker.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=300),
        # Seconds between a worker's sweeps for such tasks (kombu's default works out at ~100 s).
        "unacked_restore_interval": env.int("CELERY_RESTORE_INTERVAL", default=30),
        "unacked_restore_throttle": 1,
    }

CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
# Lets two portals (or a test run) share one Redis without taking each other's tasks.
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Any number of beats may run: the one holding a database lease sends (portal/beat.py). It
# renews every third of BEAT_LEASE_SECONDS; a standby tries every BEAT_LEASE_POLL_SECONDS, so a
# killed leader is replaced within lease + poll seconds (docs/operations.md, "Beat").
CELERY_BEAT_SCHEDULER = "portal.beat:LeaderScheduler"
BEAT_LEASE_SECONDS = env.float("BEAT_LEASE_SECONDS", default=30.0)
BEAT_LEASE_POLL_SECONDS = env.float("BEAT_LEASE_POLL_SECONDS", default=BEAT_LEASE_SECONDS / 3)
if not (0 < BEAT_LEASE_SECONDS <= 3600 and 0 < BEAT_LEASE_POLL_SECONDS <= BEAT_LEASE_SECONDS):
    raise ImproperlyConfigured(
        "BEAT_LEASE_SECONDS must be in (0, 3600] and BEAT_LEASE_POLL_SECONDS in (0, lease]"
    )
# Invites naming no account that one person may send within an hour before their invites are
# paused (teams.memberships.membership_invite): a team admin cannot probe for accounts in bulk.
TEAM_INVITE_MISSES_PER_HOUR = env.int("TEAM_INVITE_MISSES_PER_HOUR", default=10)
# Days a request above quota waits for a platform admin before it expires.
QUOTA_REQUEST_EXPIRY_DAYS = env.int("QUOTA_REQUEST_EXPIRY_DAYS", default=7)

# Team webhooks (notifications/webhook_delivery.py, docs/notifications.md): each POST waits at most
# WEBHOOK_TIMEOUT_SECONDS; a delivery is tried WEBHOOK_MAX_ATTEMPTS times, waiting
# WEBHOOK_BACKOFF_SECONDS doubled after each failure; WEBHOOK_DISABLE_AFTER failed deliveries
# in a row disable the hook. WEBHOOK_ENCRYPTION_KEYS: Fernet keys, newest first (comma
# separated), that encrypt the hooks' URLs and secrets; empty derives one from SECRET_KEY.
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", default=5.0)
WEBHOOK_MAX_ATTEMPTS = env.int("WEBHOOK_MAX_ATTEMPTS", default=5)
WEBHOOK_BACKOFF_SECONDS = env.float("WEBHOOK_BACKOFF_SECONDS", default=30.0)
WEBHOOK_DISABLE_AFTER = env.int("WEBHOOK_DISABLE_AFTER", default=10)
WEBHOOK_ENCRYPTION_KEYS = env.list("WEBHOOK_ENCRYPTION_KEYS", default=[])
# Seconds between sweeps that re-queue workspaces whose task was lost.
PORTAL_RECONCILE_INTERVAL = env.float("PORTAL_RECONCILE_INTERVAL", default=60.0)

# --- Secret key ------------------------------------------------------------------------------
# Signs sessions and keys the agents' and JupyterLab's tokens. A deployment sets SECRET_KEY;
# the embedded default alone keeps a random one in var/secret_key (portal/secret_key.py).
_EMBEDDED = is_embedded(
    database_engine=DATABASES["default"]["ENGINE"],
    broker_url=CELERY_BROKER_URL,
    allowed_hosts=ALLOWED_HOSTS,
)
if _EMBEDDED:  # var/ holds the sessions (SQLite) and the broker's messages: this user's only
    var_dir_make_private(VAR_DIR, leave=frozenset({SECRET_KEY_FILE}))
SECRET_KEY = secret_key(
    configured=env.str("SECRET_KEY", default=""), debug=DEBUG, embedded=_EMBEDDED, var_dir=VAR_DIR
)

# --- Telemetry and idle stop -------------------------------------------------------------
# Seconds between the agent's samples (docs/agent-protocol.md).
AGENT_INTERVAL_SECONDS = env.float("AGENT_INTERVAL_SECONDS", default=30.0)
# Seconds between idle sweeps (Celery beat).
IDLE_SWEEP_SECONDS = env.float("IDLE_SWEEP_SECONDS", default=15.0)
# The fair queue (scheduling/, docs/scarce-gpus.md): the half-life of a team's past GPU-hours
# (hours; Slurm's default PriorityDecayHalfLife, 7 days), the GPU-hours each start counts at
# once within a pass, how often a pass runs without a freed GPU to trigger it (seconds), and
# how long the owner has to claim a workspace the queue started (minutes).
QUEUE_HALF_LIFE_HOURS = env.float("QUEUE_HALF_LIFE_HOURS", default=168.0)
QUEUE_CHARGE_HOURS = env.float("QUEUE_CHARGE_HOURS", default=1.0)
QUEUE_PASS_SECONDS = env.float("QUEUE_PASS_SECONDS", default=15.0)
QUEUE_CLAIM_MINUTES = env.int("QUEUE_CLAIM_MINUTES", default=30)
# A stopped VM Azure refused to start for lack of room waits in the queue at least this long
# (seconds) before it is tried again: Azure publishes no capacity figure to wait on.
QUEUE_START_RETRY_SECONDS = env.float("QUEUE_START_RETRY_SECONDS", default=300.0)
# GPU work shorter than this is a spike; a silence longer than IDLE_GAP_SECONDS breaks the
# evidence of idleness and shows "no telemetry" (seconds).
IDLE_SPIKE_SECONDS = env.float("IDLE_SPIKE_SECONDS", default=60.0)
IDLE_GAP_SECONDS = env.float("IDLE_GAP_SECONDS", default=180.0)
# Multiplies every idle-policy duration: 1 in production; e.g. 0.05 in a demo turns 30 min
# of idleness into 90 s.
IDLE_TIME_SCALE = env.float("IDLE_TIME_SCALE", default=1.0)
# Heartbeats are stored in batches every this many seconds by each web process (0: in the
# request); at most HEARTBEAT_BUFFER_MAX wait, then agents get 503 and keep their own buffer.
HEARTBEAT_FLUSH_SECONDS = env.float("HEARTBEAT_FLUSH_SECONDS", default=0.25)
HEARTBEAT_BUFFER_MAX = env.int("HEARTBEAT_BUFFER_MAX", default=20_000)
# Heartbeats one agent token may send at once (its backlog after an outage: a day of samples
# is 24 heartbeats of 120), refilled at two per AGENT_INTERVAL_SECONDS, per web process;
# beyond it, 429 with Retry-After. Also the most heartbeats one agent may have waiting in a
# process's buffer (never over a tenth of HEARTBEAT_BUFFER_MAX; beyond it, 503).
HEARTBEAT_BURST = env.int("HEARTBEAT_BURST", default=30)
# Wrong agent tokens one client address may send per minute (as a burst, too), per web
# process; beyond it, 429 before the database is asked (a token once accepted still passes).
HEARTBEAT_BAD_TOKENS_PER_MINUTE = env.int("HEARTBEAT_BAD_TOKENS_PER_MINUTE", default=30)
# Seconds a web process trusts an agent token it has checked; a revoked token is refused
# within this time.
HEARTBEAT_AUTH_CACHE_SECONDS = env.float("HEARTBEAT_AUTH_CACHE_SECONDS", default=30.0)
# Hours raw telemetry samples are kept before they are folded into hourly rows.
TELEMETRY_RAW_HOURS = env.int("TELEMETRY_RAW_HOURS", default=48)

# --- Spend -------------------------------------------------------------------------------
# Seconds between rollups of complete days into DailySpend (Celery beat); today is live.
SPEND_ROLLUP_SECONDS = env.float("SPEND_ROLLUP_SECONDS", default=900.0)
# Seconds between checks of the teams' spend against 50/80/100 % of their budget (Celery beat).
SPEND_ALERT_SECONDS = env.float("SPEND_ALERT_SECONDS", default=300.0)
# UTC hour of the nightly fetch of Azure's actual costs (Cost Management) for reconciliation.
ACTUAL_COSTS_SYNC_HOUR = env.int("ACTUAL_COSTS_SYNC_HOUR", default=4)

# --- Azure --------------------------------------------------------------------------------
AZURE_SUBSCRIPTION_ID = env.str(
    "AZURE_SUBSCRIPTION_ID", default="00000000-0000-0000-0000-000000000000"
)
AZURE_RESOURCE_GROUP = env.str("AZURE_RESOURCE_GROUP", default="rg-gpu-portal")
AZURE_LOCATION = env.str("AZURE_LOCATION", default="eastus")
AZURE_SUBNET_ID = env.str(
    "AZURE_SUBNET_ID",
    default=(
        f"/subscriptions/{AZURE_SUBSCRIPTION_ID}/resourceGroups/{AZURE_RESOURCE_GROUP}"
        "/providers/Microsoft.Network/virtualNetworks/portal-vnet/subnets/workspaces"
    ),
)
CLOUDSIM_PORT = env.int("CLOUDSIM_PORT", default=8100)
# The ARM endpoint. Production: https://management.azure.com; the default is the emulator.
AZURE_ENDPOINT = env.str("AZURE_ENDPOINT", default=f"http://127.0.0.1:{CLOUDSIM_PORT}")
# "default" = azure-identity DefaultAzureCredential; "emulator" = dummy token, loopback only.
AZURE_CREDENTIAL = env.str(
    "AZURE_CREDENTIAL",
    default="emulator" if AZURE_ENDPOINT.startswith("http://127.0.0.1") else "default",
)
# After SECRET_KEY (refused first) and AZURE_CREDENTIAL: both say what production is.
require_production_settings(
    environ=os.environ, embedded=_EMBEDDED, azure_credential=AZURE_CREDENTIAL
)
# Plain-http webhooks to a loopback address (notifications/webhook_addresses.py): on in the embedded
# demo, for a local receiver; a deployment on the emulator (the tests, the benchmarks) may turn it
# on; anywhere else, production, it is refused. Hooks never reach private, link-local, reserved
# or cluster addresses.
WEBHOOK_ALLOW_LOOPBACK = webhook_allow_loopback(
    configured=env.bool("WEBHOOK_ALLOW_LOOPBACK", default=_EMBEDDED),
    embedded=_EMBEDDED,
    azure_credential=AZURE_CREDENTIAL,
)
# Environments' VM images must name a fixed version (never "latest") where production is (the
# same test as require_production_settings'); the emulator and the embedded demo may float.
ENVIRONMENT_IMAGES_PINNED = env.bool(
    "ENVIRONMENT_IMAGES_PINNED", default=not _EMBEDDED and AZURE_CREDENTIAL != "emulator"
)
AZURE_RETRY_TOTAL = env.int("AZURE_RETRY_TOTAL", default=3)
# Azure Retail Prices API (no credential); the emulator serves it too.
AZURE_PRICES_ENDPOINT = env.str(
    "AZURE_PRICES_ENDPOINT",
    default=AZURE_ENDPOINT if "127.0.0.1" in AZURE_ENDPOINT else "https://prices.azure.com",
)
AZURE_RETRY_BACKOFF = env.float("AZURE_RETRY_BACKOFF", default=0.8)
# Seconds each attempt of an Azure or Kubernetes call may take to connect and to read, in the
# worker (azure-core's and urllib3's own defaults wait 300 s or for ever).
AZURE_CONNECT_TIMEOUT = env.float("AZURE_CONNECT_TIMEOUT", default=10.0)
AZURE_READ_TIMEOUT = env.float("AZURE_READ_TIMEOUT", default=120.0)
# Calls a web request waits for (a kubeconfig download, registering an AKS cluster): each
# attempt connects within AZURE_REQUEST_CONNECT_TIMEOUT and reads within
# AZURE_REQUEST_READ_TIMEOUT seconds, the request waits at most AZURE_REQUEST_DEADLINE
# seconds in all (then 504), and at most AZURE_REQUEST_SLOTS such calls run at once per web
# process (one more is refused at once, 503), so the other threads of PORTAL_WSGI_THREADS
# keep serving pages, /healthz and heartbeats whatever Azure does (cloud/bounded.py).
AZURE_REQUEST_CONNECT_TIMEOUT = env.float("AZURE_REQUEST_CONNECT_TIMEOUT", default=5.0)
AZURE_REQUEST_READ_TIMEOUT = env.float("AZURE_REQUEST_READ_TIMEOUT", default=10.0)
AZURE_REQUEST_DEADLINE = env.float("AZURE_REQUEST_DEADLINE", default=10.0)
AZURE_REQUEST_SLOTS = env.int("AZURE_REQUEST_SLOTS", default=2)
# Seconds between polls of an Azure long-running operation (the emulator's finish in seconds).
AZURE_POLLING_INTERVAL = env.float(
    "AZURE_POLLING_INTERVAL", default=1.0 if AZURE_CREDENTIAL == "emulator" else 5.0
)
# The Prometheus HTTP API that scrapes the NVIDIA DCGM exporter on the AKS clusters (for example
# Azure Monitor managed Prometheus's query endpoint, or http://prometheus:9090). Unset: namespace
# workspaces are busy while a pod holding GPUs runs; set: while DCGM sees their GPUs used
# (clusters/dcgm.py). The emulator serves one at <emulator>/prometheus.
PROMETHEUS_URL = env.str("PROMETHEUS_URL", default="")
PROMETHEUS_TIMEOUT = env.float("PROMETHEUS_TIMEOUT", default=5.0)  # Seconds per query.
# Seconds between Azure quota and SKU re-checks of a requested workspace that waits for them.
AZURE_PRECHECK_RETRY_SECONDS = env.float("AZURE_PRECHECK_RETRY_SECONDS", default=300.0)
# Seconds between looks at a MIG pod waiting for a free slice (it starts by itself once bound).
KUBE_PENDING_RETRY_SECONDS = env.float("KUBE_PENDING_RETRY_SECONDS", default=15.0)
# Seconds between looks at a setting-up VM's agent (its driver, environment layer, JupyterLab),
# and how long it may set up before it fails (the layer's unit gives up after 60 minutes and
# the driver extension takes up to ~20: docs/environments.md, "From request to Ready").
SETUP_POLL_SECONDS = env.float("SETUP_POLL_SECONDS", default=5.0)
SETUP_TIMEOUT_MINUTES = env.int("SETUP_TIMEOUT_MINUTES", default=90)
# Bookings (docs/bookings.md): their capacity reservation is made this many minutes before the
# window (so the GPUs are there when it starts), their maker warned this many before its end,
# and beat advances them every BOOKING_TICK_SECONDS.
BOOKING_HOLD_MINUTES = env.int("BOOKING_HOLD_MINUTES", default=30)
BOOKING_WARN_MINUTES = env.int("BOOKING_WARN_MINUTES", default=15)
BOOKING_TICK_SECONDS = env.float("BOOKING_TICK_SECONDS", default=60.0)
# Seconds between checks of running Spot VMs' power states for evictions (Celery beat).
SPOT_EVICTION_CHECK_SECONDS = env.float("SPOT_EVICTION_CHECK_SECONDS", default=60.0)
# Seconds the approval queue keeps Azure's quota-left figures before asking ARM again.
AZURE_HEADROOM_CACHE_SECONDS = env.int("AZURE_HEADROOM_CACHE_SECONDS", default=60)
WORKSPACE_SSH_USER = env.str("WORKSPACE_SSH_USER", default="researcher")
# How many times a task retries a throttled, conflicting or 5xx Azure call before giving up.
WORKSPACE_RETRY_MAX = env.int("WORKSPACE_RETRY_MAX", default=8)

# --- Entra ID sign-in (teams/entra_oidc.py, teams/entra.py; docs/entra-id.md) ---------------
# `make run` sets ENTRA_DEMO: the embedded default alone then signs in against the emulator's
# tenant (cloudsim/entra). Anywhere else ENTRA_DEMO changes nothing.
_ENTRA_DEMO = env.bool("ENTRA_DEMO", default=False) and _EMBEDDED
_EMULATOR = f"http://127.0.0.1:{CLOUDSIM_PORT}"
# Off unless both ids are set: the login page then shows only the local password form.
ENTRA_TENANT_ID = env.str(
    "ENTRA_TENANT_ID", default="11111111-1111-1111-1111-111111111111" if _ENTRA_DEMO else ""
)
ENTRA_CLIENT_ID = env.str(
    "ENTRA_CLIENT_ID", default="22222222-2222-2222-2222-222222222222" if _ENTRA_DEMO else ""
)
# Never logged. The emulator's demo secret is refused outside the embedded default.
ENTRA_CLIENT_SECRET = entra_client_secret(
    configured=env.str("ENTRA_CLIENT_SECRET", default="demo-client-secret" if _ENTRA_DEMO else ""),
    embedded=_EMBEDDED,
)
# Production: Entra's public cloud. The demo and the tests: the emulator's URL (cloudsim).
ENTRA_AUTHORITY = env.str(
    "ENTRA_AUTHORITY", default=_EMULATOR if _ENTRA_DEMO else "https://login.microsoftonline.com"
)
# Microsoft Graph, asked for a user's groups when the ID token has too many to carry them.
ENTRA_GRAPH_ENDPOINT = env.str(
    "ENTRA_GRAPH_ENDPOINT", default=_EMULATOR if _ENTRA_DEMO else "https://graph.microsoft.com"
)
# App roles of the portal's app registration (the ID token's `roles` claim).
ENTRA_PLATFORM_ADMIN_APP_ROLE = env.str("ENTRA_PLATFORM_ADMIN_APP_ROLE", default="Platform.Admin")
ENTRA_TEAM_ADMIN_APP_ROLE = env.str("ENTRA_TEAM_ADMIN_APP_ROLE", default="Team.Admin")
# Seconds of clock skew tolerated on the ID token's exp, nbf and iat.
ENTRA_LEEWAY_SECONDS = env.int("ENTRA_LEEWAY_SECONDS", default=120)
# Seconds for Entra ID's and Graph's HTTP calls.
ENTRA_HTTP_TIMEOUT = env.float("ENTRA_HTTP_TIMEOUT", default=10.0)
# Seconds between Graph syncs (teams.entra_sync): leavers of a linked group lose the team and
# users disabled in Entra ID are deactivated within this time, without signing in again.
ENTRA_SYNC_SECONDS = env.float("ENTRA_SYNC_SECONDS", default=300.0)
# Local accounts' passwords (portal/password_login.py): the embedded demo and break-glass.
# Off in production once everyone signs in with Entra ID; refused off without Entra ID sign-in.
PASSWORD_LOGIN = password_login(
    configured=env.bool("PASSWORD_LOGIN", default=True),
    entra_tenant_id=ENTRA_TENANT_ID,
    entra_client_id=ENTRA_CLIENT_ID,
)

# --- The API (/api/v1/, api/; docs/api-tokens.md) ----------------------------------------------
# Requests per minute each personal access token (or Entra ID identity) may make; over it the
# API answers 429 with Retry-After. Counted in the cache (CACHE_URL), shared by all workers.
# 0 turns the limit off.
API_RATE_PER_MINUTE = env.int("API_RATE_PER_MINUTE", default=120)

# --- Metrics (portal/metrics.py, docs/operations.md "Metrics") ---------------------------------
# /metrics wants "Authorization: Bearer <METRICS_TOKEN>"; without a token it answers 404. Only the
# token's SHA-256 stays in settings (METRICS_TOKEN_SHA256 may be given instead of the token).
METRICS_TOKEN_SHA256 = metrics_token_sha256(
    token=env.str("METRICS_TOKEN", default=""),
    sha256=env.str("METRICS_TOKEN_SHA256", default=""),
)
# Seconds a scrape's month-to-date spend and GPU-hours per team are reused (0: computed at every
# scrape); the spend pages themselves always compute them afresh.
METRICS_SPEND_CACHE_SECONDS = env.int("METRICS_SPEND_CACHE_SECONDS", default=60)
