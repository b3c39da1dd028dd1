"""One settings module, driven by environment variables (see README, "Configuration")."""

import ipaddress
import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF

from config import embedded_redis, process_role
from config.env import (
    SettingError,
    check_secret,
    env_allow_list,
    env_bool,
    env_connector_secrets,
    env_int,
    env_list,
    env_permission_sources,
    env_role_map,
    env_secret,
    env_str,
    env_url,
)
from config.outbound import naming_entries
from config.private_files import create_private, touch_private, var_dir
from config.redis_connection import RedisTarget, parse_sentinels

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = var_dir()

DEBUG = env_bool("DEBUG", True)


def _secret(name: str, file_name: str) -> str:
    """A secret from the environment, refused when weak; in DEBUG a random one kept under var/
    (owner-only, never in the DB)."""
    value = env_secret(name)
    if value:
        return value
    if not DEBUG:
        raise SettingError(f"{name} must be set when DEBUG is off")
    path = VAR_DIR / file_name
    create_private(path, secrets.token_urlsafe(48))
    return check_secret(f"{name} (from {path})", path.read_text().strip())


SECRET_KEY = _secret("SECRET_KEY", "secret-key")
# The audit trail (README, "The audit trail"). Checkpoints are signed with an Ed25519 key held
# outside the database (PEM or base64 raw, or a file; under DEBUG generated into var/ on first
# use); AUDIT_SIGNING_KEY is the HMAC secret that still verifies checkpoints made before Ed25519.
AUDIT_SIGNING_KEY = _secret("AUDIT_SIGNING_KEY", "audit-signing-key")
AUDIT_PRIVATE_KEY = env_str("AUDIT_PRIVATE_KEY", "")
AUDIT_PRIVATE_KEY_FILE = env_str("AUDIT_PRIVATE_KEY_FILE", "")
AUDIT_PRIVATE_KEY_GENERATE = DEBUG and not (AUDIT_PRIVATE_KEY or AUDIT_PRIVATE_KEY_FILE)
if AUDIT_PRIVATE_KEY_GENERATE:
    AUDIT_PRIVATE_KEY_FILE = str(VAR_DIR / "audit-private-key.pem")
elif not (AUDIT_PRIVATE_KEY or AUDIT_PRIVATE_KEY_FILE):
    raise SettingError("AUDIT_PRIVATE_KEY or AUDIT_PRIVATE_KEY_FILE must be set when DEBUG is off")
AUDIT_CHECKPOINT_EVERY = env_int("AUDIT_CHECKPOINT_EVERY", 1000, minimum=1)
AUDIT_CHECKPOINT_MINUTES = env_int("AUDIT_CHECKPOINT_MINUTES", 5, minimum=1)
# The public keys verify trusts, each with the tree sizes it may sign: a trusted key list file
# (docs/audit-format.md, "Trusted keys"), never the database. By default trusted-keys.json
# beside the private key file (written with a generated key and by `audit rotate-key`); with
# no such file, only the current signing key is trusted, for every size.
AUDIT_TRUSTED_KEYS_FILE = env_str("AUDIT_TRUSTED_KEYS_FILE", "")
# The last tree head the signer signed, kept outside the database (beside the key): each new
# head must be proven consistent with it before it is signed. A refusal is kept beside it, in
# <file>.refused, until a head is signed again (/readyz reports it).
AUDIT_SIGNED_HEAD_FILE = env_str("AUDIT_SIGNED_HEAD_FILE", "") or str(
    (Path(AUDIT_PRIVATE_KEY_FILE).parent if AUDIT_PRIVATE_KEY_FILE else VAR_DIR)
    / "signed-head.json")
# Where every checkpoint is also published: file:///dir and https://... URLs; `none` for no
# witness. The development installation (a generated key) publishes to a directory witness
# under var/ by default.
AUDIT_WITNESSES = env_list("AUDIT_WITNESSES", [f"file://{VAR_DIR / 'audit-witness'}"]
                           if AUDIT_PRIVATE_KEY_GENERATE else [])
if AUDIT_WITNESSES == ["none"]:
    AUDIT_WITNESSES = []
AUDIT_WITNESS_SECRET = env_str("AUDIT_WITNESS_SECRET", "")
# Where HTTP witnesses may be POSTed, entries as DECISION_WEBHOOK_HOSTS (config/outbound.py);
# by default each configured witness's own host and port. Either way every POST goes to the
# address its name resolves to when sent, checked (a private one only when an IP/CIDR entry
# names it), and never follows a redirect.
AUDIT_WITNESS_HOSTS = env_allow_list("AUDIT_WITNESS_HOSTS") or naming_entries(AUDIT_WITNESSES)
# writers: an entry takes its place in the log in its own transaction when no one holds the
# head, else it queues (never waiting); after each commit the writer places the queue if the head
# is free, and the RQ workers' sequencer places whatever is left. workers: entries always queue
# and only the workers' sequencer places them (README, "The audit trail").
AUDIT_SEQUENCER = env_str("AUDIT_SEQUENCER", "writers")
if AUDIT_SEQUENCER not in ("writers", "workers"):
    raise SettingError("AUDIT_SEQUENCER must be writers or workers")
AUDIT_SEQUENCE_DELAY_SECONDS = env_int("AUDIT_SEQUENCE_DELAY_SECONDS", 1, minimum=1)
# Processes a verify of the whole trail (PostgreSQL) spreads its hashing over; 1 keeps it in the
# calling process.
AUDIT_VERIFY_PROCESSES = env_int("AUDIT_VERIFY_PROCESSES", os.cpu_count() or 1, minimum=1)
# The most entries one evidence bundle carries (each with its proof); ask for a shorter period.
AUDIT_EVIDENCE_MAX_ENTRIES = env_int("AUDIT_EVIDENCE_MAX_ENTRIES", 10000, minimum=1)

# The reconcile loop (DESIGN.md §5).
RECONCILE_RESYNC_SECONDS = env_int("RECONCILE_RESYNC_SECONDS", 60, minimum=5)
RECONCILE_HOLD_SECONDS = env_int("RECONCILE_HOLD_SECONDS", 300, minimum=0)
RECONCILE_VERIFY_TIMEOUT_SECONDS = env_int("RECONCILE_VERIFY_TIMEOUT_SECONDS", 60, minimum=1)
RECONCILE_VERIFY_DELAY_SECONDS = env_int("RECONCILE_VERIFY_DELAY_SECONDS", 5, minimum=1)
RECONCILE_MAX_ATTEMPTS = env_int("RECONCILE_MAX_ATTEMPTS", 3, minimum=1)
RECONCILE_LOCK_SECONDS = env_int("RECONCILE_LOCK_SECONDS", 120, minimum=5)
RECONCILE_MAX_RETRIES = env_int("RECONCILE_MAX_RETRIES", 5, minimum=0)
# Silence (reconciliation/silence.py): how long an agent may go unheard before it turns
# Ready=Unknown (Silent), by connector kind unless its spec says `heartbeat`; 0 never. The
# sandbox is the control plane's own simulation, read by it: never silent by default.
HEARTBEAT_PUSH_SECONDS = env_int("HEARTBEAT_PUSH_SECONDS", 300, minimum=0)
HEARTBEAT_HTTP_SECONDS = env_int("HEARTBEAT_HTTP_SECONDS", 300, minimum=0)
HEARTBEAT_SANDBOX_SECONDS = env_int("HEARTBEAT_SANDBOX_SECONDS", 0, minimum=0)
SILENCE_CHECK_SECONDS = env_int("SILENCE_CHECK_SECONDS", 30, minimum=1)
# The fleet view (reconciliation/fleet_snapshot.py) is computed on the workers: a change it
# reads queues a refresh this many seconds later, so a burst of changes costs one refresh.
FLEET_SNAPSHOT_DELAY_SECONDS = env_int("FLEET_SNAPSHOT_DELAY_SECONDS", 5, minimum=0)
# The periodic resync refreshes it too, as a backstop, once it is older than this (at 100,000
# agents a refresh takes tens of seconds of a worker: not every minute).
FLEET_SNAPSHOT_BACKSTOP_SECONDS = env_int("FLEET_SNAPSHOT_BACKSTOP_SECONDS", 300, minimum=0)
# Tests of dead workers: the sandbox's injected crash kills the worker process for real.
SANDBOX_CRASH_KILLS_PROCESS = env_bool("SANDBOX_CRASH_KILLS_PROCESS", False)
# The demo's background simulator drifts a random sandbox agent this often (0: off).
DEMO_SIMULATOR_SECONDS = env_int("DEMO_SIMULATOR_SECONDS", 0, minimum=0)
DECISION_TIMEOUT_SECONDS = env_int("DECISION_TIMEOUT_SECONDS", 300, minimum=5)
# How long each kind of inbox item may wait (its SLA): the queue sorts by the time left, and a
# breach alerts once. A runtime decision's own expiry is its deadline when it comes sooner.
INBOX_SLA_DECISION_SECONDS = env_int("INBOX_SLA_DECISION_SECONDS", 300, minimum=1)
INBOX_SLA_ESCALATION_SECONDS = env_int("INBOX_SLA_ESCALATION_SECONDS", 4 * 3600, minimum=1)
INBOX_SLA_PROPOSAL_SECONDS = env_int("INBOX_SLA_PROPOSAL_SECONDS", 2 * 86400, minimum=1)
# How often the cron looks for new inbox items to notify about and for SLA breaches (each sweep
# also schedules the next at the earliest coming deadline).
INBOX_SWEEP_SECONDS = env_int("INBOX_SWEEP_SECONDS", 30, minimum=1)
# Notifications: where links point, email through Django's mail backend, incoming webhooks
# (Slack/Teams-compatible `{"text": ...}`) only to allow-listed hosts, digests this often.
SITE_URL = (env_url("SITE_URL", {"http", "https"}) or "http://localhost:8000").rstrip("/")
NOTIFY_WEBHOOK_HOSTS = env_allow_list("NOTIFY_WEBHOOK_HOSTS")
NOTIFY_DIGEST_MINUTES = env_int("NOTIFY_DIGEST_MINUTES", 60, minimum=1)
# How many notification addresses one person (or one team) may have: each must be verified
# (a token sent to it, confirmed) before anything else is sent there.
NOTIFY_MAX_ADDRESSES = env_int("NOTIFY_MAX_ADDRESSES", 5, minimum=1)
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "agent-governance@localhost")
# With Django's file backend (the demo's mail sink), where each sent message is written; admins
# and compliance read them on /mail/.
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
# A proposal's backtest replays at most this many of the agent's latest events (and says so).
BACKTEST_MAX_EVENTS = env_int("BACKTEST_MAX_EVENTS", 10000, minimum=1)
WHATIF_MAX_EVENTS = env_int("WHATIF_MAX_EVENTS", 200000, minimum=1)
# Retention (reconciliation/retention.py): days kept per kind; on PostgreSQL whole day
# partitions are dropped, on SQLite rows are deleted in batches. Fewer days than the rules,
# backtests and what-ifs read fail the start-up checks (retention.E001).
RETENTION_EVENTS_DAYS = env_int("RETENTION_EVENTS_DAYS", 90, minimum=1)
RETENTION_OBSERVATIONS_DAYS = env_int("RETENTION_OBSERVATIONS_DAYS", 90, minimum=1)
RETENTION_RUNS_DAYS = env_int("RETENTION_RUNS_DAYS", 30, minimum=1)
RETENTION_ALERTS_DAYS = env_int("RETENTION_ALERTS_DAYS", 30, minimum=1)
RETENTION_PARTITIONS_AHEAD_DAYS = env_int("RETENTION_PARTITIONS_AHEAD_DAYS", 7, minimum=2)
RETENTION_CHECK_SECONDS = env_int("RETENTION_CHECK_SECONDS", 3600, minimum=60)
RETENTION_DELETE_BATCH = env_int("RETENTION_DELETE_BATCH", 5000, minimum=1)
# Worst-case work units of one guardrail evaluation (see registry/guardrail_cost.py).
GUARDRAIL_COST_BUDGET = env_int("GUARDRAIL_COST_BUDGET", 1_000_000, minimum=100)
# Where outbound requests may go: `host[:port]` entries (host a `*.corp.example` glob, an IP or
# a CIDR; no port: the scheme's default). Private, loopback and link-local addresses only when
# an IP/CIDR entry names them (config/outbound.py). None: no webhooks / http connectors.
DECISION_WEBHOOK_HOSTS = env_allow_list("DECISION_WEBHOOK_HOSTS")
CONNECTOR_ALLOWED_HOSTS = env_allow_list("CONNECTOR_ALLOWED_HOSTS")
# Git sources of desired state (gitsource/): the hosts http(s) and ssh repositories and their
# commit-status endpoints may be on, the directories local repositories may be read from (none
# by default: a local path reads this host's files), where fetched branches are cached, how
# long one git call may take and how often every source is polled.
GIT_SOURCE_ALLOWED_HOSTS = env_allow_list("GIT_SOURCE_ALLOWED_HOSTS")
GIT_SOURCE_LOCAL_ROOTS = env_list("GIT_SOURCE_LOCAL_ROOTS", [])
GIT_CACHE_DIR = env_str("GIT_CACHE_DIR", str(VAR_DIR / "git-cache"))
GIT_FETCH_TIMEOUT_SECONDS = env_int("GIT_FETCH_TIMEOUT_SECONDS", 60, minimum=1)
GIT_POLL_SECONDS = env_int("GIT_POLL_SECONDS", 60, minimum=5)
# Platform secrets an http connector may sign with: names of environment variables (or of
# NAME_FILE variables holding a file's path). Admin grants each to owners; manifests name them.
CONNECTOR_SECRETS = env_connector_secrets("CONNECTOR_SECRETS")
# Where agents' permissions are granted (a database role per agent, ...), read and corrected
# there: JSON declared by the admin, credentials in one of CONNECTOR_SECRETS (docs/connectors.md).
PERMISSION_SOURCES = env_permission_sources("PERMISSION_SOURCES", CONNECTOR_SECRETS)
# The longest answer a platform or a webhook receiver may give; longer fails the call.
OUTBOUND_MAX_ANSWER_BYTES = env_int("OUTBOUND_MAX_ANSWER_BYTES", 1_048_576, minimum=1024)
# When set, webhook calls carry X-AgentGov-Signature (HMAC-SHA256) for the agent to check.
DECISION_WEBHOOK_SECRET = env_secret("DECISION_WEBHOOK_SECRET", "") or ""
BREAKER_SHARE_PERCENT = env_int("BREAKER_SHARE_PERCENT", 20, minimum=1)
BREAKER_WINDOW_SECONDS = env_int("BREAKER_WINDOW_SECONDS", 300, minimum=10)
BREAKER_MIN_AGENTS = env_int("BREAKER_MIN_AGENTS", 5, minimum=1)
# An owner's or a team's breaker needs a wave of its own, not a few drifts by chance.
BREAKER_SCOPE_MIN_DRIFTING = env_int("BREAKER_SCOPE_MIN_DRIFTING", 5, minimum=1)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # Before registry, whose admin module replaces django-otp's device admin with a read-only one.
    "django_otp",
    "django_otp.plugins.otp_totp",
    # Before django.contrib.auth, so its `createsuperuser` (which audits) is the one that runs.
    "registry",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_rq",
    "channels",
    "django_htmx",
    "axes",
    "csp",
    "config",
    "audit",
    "reconciliation",
    "runtime",
    "sandbox",
    "sources",
    "gitsource",
    "compliance",
    "console",
    "siem",
    "chat",
    # Last: its ready() ends the start-up the entry points began with the collector paused.
    "config.startup.StartedConfig",
]
# daphne's app only swaps `runserver` for an ASGI one (websockets); importing it installs
# Twisted's reactor (~0.2 s of CPU), which every worker, cron and command paid for nothing.
# The web process is `agentgov serve` (daphne itself); `runserver` still gets it, however it
# is named (`manage.py runserver`, `agentgov manage runserver`, `django-admin runserver`).
if "runserver" in sys.argv[1:]:
    INSTALLED_APPS.insert(0, "daphne")

MIDDLEWARE = [
    "config.observability.RequestMetricsMiddleware",
    "audit.context.RequestIdMiddleware",
    "config.replica_reads.ReplicaReadsMiddleware",
    # The response headers every answer carries, the early refusals below included.
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Before anything reads the body (the CSRF check reads a form's).
    "config.limits.BodySizeLimitMiddleware",
    # A NUL in the path or query (no database text holds one) is a 400 before any view.
    "config.url_text.UrlTextMiddleware",
    # A write's query parameter its view does not read (`?dry_run=1` where there is none).
    "config.write_parameters.WriteParametersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Turns a sign-in refused by the limit into its 429, on every sign-in path.
    "axes.middleware.AxesMiddleware",
    # Under DEBUG (the demo), the product's 404 page instead of Django's list of every URL.
    "config.debug_not_found.ProductNotFoundMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The console's templates first: they replace the admin's of the same name.
        "DIRS": [BASE_DIR / "console" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.roles_context",
            ],
        },
    },
]

# Database: PostgreSQL when DATABASE_URL is set, SQLite under var/ otherwise.
DATABASE_URL = env_url("DATABASE_URL", {"postgres", "postgresql", "sqlite"})
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    touch_private(VAR_DIR / "db.sqlite3")  # made owner-only before SQLite makes it 0644
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "db.sqlite3",
            # A file, not memory, so servers started by tests see the test database.
            "TEST": {"NAME": str(VAR_DIR / "test-db.sqlite3")},
        }
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Writers take the lock at BEGIN, so two transactions never both read the audit head
    # and then race to append after it; the timeout waits for the lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"transaction_mode": "IMMEDIATE", "timeout": 20,
         "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}
    )
else:
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # A process cut off mid-transaction (a network partition, a frozen VM) keeps its row locks
    # until PostgreSQL ends its session, which TCP keepalives do only after hours: every later
    # pass of that agent would wait on them. PostgreSQL ends such a session after this long.
    DATABASE_IDLE_IN_TRANSACTION_SECONDS = env_int("DATABASE_IDLE_IN_TRANSACTION_SECONDS", 60,
                                                   minimum=0)
    if DATABASE_IDLE_IN_TRANSACTION_SECONDS:
        _options = DATABASES["default"].setdefault("OPTIONS", {})
        _options["options"] = (f"{_options.get('options', '')} -c idle_in_transaction_session"
                               f"_timeout={DATABASE_IDLE_IN_TRANSACTION_SECONDS * 1000}").strip()
    # And this side's view of the same cut: a process waiting on an answer that the network
    # lost (PostgreSQL ended the session meanwhile, and its goodbye went nowhere) would wait
    # for its job's timeout. TCP keepalives probe a connection quiet this long every third of
    # it: a server that forgot it answers at once (reset), one that cannot be reached is given
    # up after three probes. A probe costs a packet; a live server's kernel answers it.
    DATABASE_KEEPALIVE_SECONDS = env_int("DATABASE_KEEPALIVE_SECONDS", 30, minimum=3)
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"keepalives": 1, "keepalives_idle": DATABASE_KEEPALIVE_SECONDS,
         "keepalives_interval": DATABASE_KEEPALIVE_SECONDS // 3, "keepalives_count": 3})
    # A web process answers each request in a thread of its own (Django under ASGI), so a
    # persistent connection was a new PostgreSQL session per request (connecting cost more
    # than a small request's queries, and a session's prepared statements went with it),
    # left open until the garbage collector found its thread's wrapper (the threads are kept
    # for later requests now, config/request_threads.py: each would hold one). The web server's
    # processes (config/asgi.py says which) keep a pool of sessions instead (psycopg_pool
    # through Django), handed to a request for its length and back. Workers run one job at a
    # time on one thread and keep their one connection; 0 turns the pool off.
    DATABASE_POOL_SIZE = env_int("DATABASE_POOL_SIZE", 10, minimum=0)
    if DATABASE_POOL_SIZE and process_role.role == process_role.WEB:
        DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps them (Django requires 0)
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1, "max_size": DATABASE_POOL_SIZE,
            # Sessions over one idle this long are closed; a request waits this long for one
            # (and, while PostgreSQL is down, this long before its 503).
            "max_idle": 60, "timeout": 5}

# PostgreSQL streaming replicas (config/replica_reads.py): list pages, list APIs, the dashboard
# and /metrics read one while it streams within the lag bound; everything else reads the primary.
DATABASE_REPLICA_URLS = env_list("DATABASE_REPLICA_URLS", [])
DATABASE_REPLICA_MAX_LAG_SECONDS = env_int("DATABASE_REPLICA_MAX_LAG_SECONDS", 5, minimum=0)
if DATABASE_REPLICA_URLS and DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    raise SettingError("DATABASE_REPLICA_URLS needs a PostgreSQL DATABASE_URL")
for _index, _url in enumerate(DATABASE_REPLICA_URLS):
    DATABASES[f"replica_{_index}"] = {
        **dj_database_url.parse(_url, conn_max_age=DATABASES["default"]["CONN_MAX_AGE"]),
        "CONN_HEALTH_CHECKS": True,
        # The primary's options (keepalives, the pool's size: a pool of its own per replica).
        "OPTIONS": dict(DATABASES["default"].get("OPTIONS", {})),
        "TEST": {"MIRROR": "default"}}
DATABASE_ROUTERS = ["config.replica_reads.ReplicaRouter"] if DATABASE_REPLICA_URLS else []

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis: REDIS_URL when set, otherwise this checkout's embedded redis-server. Importing the
# settings starts nothing: the launcher, `manage.py` and the test setup start the embedded server
# (and set REDIS_URL for what they run); here its address is only read from its config. While
# it is not running, Redis is "down": the site serves reads and says so at /readyz.
REDIS_URL = (env_url("REDIS_URL", {"redis", "rediss", "unix"})
             or embedded_redis.configured_url(VAR_DIR / "redis"))
# Redis Sentinel (config/redis_connection.py): the sentinels name the current primary of
# REDIS_SENTINEL_MASTER; REDIS_URL then gives only the database number and password.
try:
    REDIS_SENTINELS = parse_sentinels(env_list("REDIS_SENTINELS", []))
except ValueError as _error:
    raise SettingError(f"REDIS_SENTINELS: {_error}") from None
REDIS_SENTINEL_MASTER = env_str("REDIS_SENTINEL_MASTER", "agentgov")
_REDIS = RedisTarget(REDIS_URL, REDIS_SENTINELS, REDIS_SENTINEL_MASTER)

RQ_QUEUES = {
    name: {**_REDIS.rq_queue(), "DEFAULT_TIMEOUT": 300}
    for name in ("reconcile", "ingest", "default")
}
# Workers run jobs in their own process (config/worker.py), recycled after so many jobs or so
# much memory; a job still running this long after its timeout has its worker killed.
RQ = {"COMMIT_MODE": "on_db_commit", "WORKER_CLASS": "config.worker.InProcessWorker"}
WORKER_MAX_JOBS = env_int("WORKER_MAX_JOBS", 1000, minimum=1)
WORKER_MAX_MEMORY_MB = env_int("WORKER_MAX_MEMORY_MB", 512, minimum=64)
WORKER_HANG_GRACE_SECONDS = env_int("WORKER_HANG_GRACE_SECONDS", 60, minimum=1)
# A web process told to stop (SIGTERM) ends this long after at the latest, whatever its
# requests' threads do (config/web_shutdown.py).
WEB_STOP_GRACE_SECONDS = env_int("WEB_STOP_GRACE_SECONDS", 5, minimum=1)
# Cron processes (config/cron_leader.py): the leader's lease; a follower takes over this long
# after the leader dies at the latest.
CRON_LEADER_SECONDS = env_int("CRON_LEADER_SECONDS", 30, minimum=3)

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py 8 reads with a 5 s socket timeout by default, which tore every idle
        # websocket down: the layer's receive blocks (BZPOPMIN) for up to 5 s. Wait longer.
        "CONFIG": {"hosts": [_REDIS.channel_host(socket_timeout=30)],
                   "prefix": env_str("CHANNEL_PREFIX", "asgi")},
    }
}
# Live alert websockets one person may hold at once, across all web processes.
WS_MAX_CONNECTIONS_PER_USER = env_int("WS_MAX_CONNECTIONS_PER_USER", 20, minimum=1)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    # Validates nothing: writes every password change, by any path, to the audit trail.
    {"NAME": "registry.password_audit.AuditPasswordChanges"},
]
# Every sign-in goes through authenticate(request, ...): axes' backend refuses it first while the
# account and client address are locked out (console/lockout_page.py).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    # Single sign-on (registry/sso_backend.py); answers only the provider's callback, and only
    # when OIDC_CLIENT_ID is set.
    "registry.sso_backend.SingleSignOnBackend",
]
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"  # shared, and needs no Redis
AXES_FAILURE_LIMIT = env_int("SIGNIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("SIGNIN_LOCKOUT_MINUTES", 15, minimum=1))
# Account and address together: guesses under random usernames from one address lock out
# nobody else behind the same proxy, and carol is not locked out by guesses from elsewhere.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "config.client_address.client_address"
AXES_LOCKOUT_CALLABLE = "console.lockout_page.locked_out"
AXES_ENABLE_ADMIN = False  # unlocking goes through `manage.py axes_reset_username`, not a click
AXES_DISABLE_ACCESS_LOG = True  # successful sign-ins are in the audit trail already
AXES_VERBOSE = False


def _networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    try:
        return [ipaddress.ip_network(value, strict=False) for value in env_list(name, [])]
    except ValueError as error:
        raise SettingError(f"{name}: {error}") from None


# Proxies whose X-Forwarded-For is believed for the client's address (config/client_address.py).
TRUSTED_PROXIES = _networks("TRUSTED_PROXIES")

# Step-up (registry/stepup.py): approving a proposal whose risk is above the threshold (unset:
# none by risk), or that a `step_up` guardrail marks, needs a TOTP code verified this recently.
STEPUP_RISK_THRESHOLD = (None if env_str("STEPUP_RISK_THRESHOLD") is None
                         else env_int("STEPUP_RISK_THRESHOLD", 0, minimum=0))
STEPUP_MAX_AGE_SECONDS = env_int("STEPUP_MAX_AGE_SECONDS", 300, minimum=30)
# After n wrong codes in a row a device refuses every code for factor * 2**(n-1) seconds.
OTP_TOTP_THROTTLE_FACTOR = env_int("STEPUP_THROTTLE_SECONDS", 1, minimum=1)
OTP_TOTP_ISSUER = "Agent governance"
# A code is accepted 30 s either side of the server's clock, never further: following a
# device's drift would let the window wander.
OTP_TOTP_SYNC = False
OTP_ADMIN_HIDE_SENSITIVE_DATA = True

# Recertification (registry/recertification.py): an approved state is reviewed again after the
# interval of its risk level (compliance may change each through the API; these are the
# defaults), the owner is reminded this many days before, and the cron looks for due and
# overdue agents this often (exact-time jobs do it first; the cron is the backstop).
RECERT_REVIEW_DAYS_HIGH = env_int("RECERT_REVIEW_DAYS_HIGH", 90, minimum=1)
RECERT_REVIEW_DAYS_MEDIUM = env_int("RECERT_REVIEW_DAYS_MEDIUM", 180, minimum=1)
RECERT_REVIEW_DAYS_LOW = env_int("RECERT_REVIEW_DAYS_LOW", 365, minimum=1)
RECERT_HIGH_RISK_FROM = env_int("RECERT_HIGH_RISK_FROM", 60, minimum=1)
RECERT_MEDIUM_RISK_FROM = env_int("RECERT_MEDIUM_RISK_FROM", 30, minimum=1)
RECERT_REMIND_DAYS = env_int("RECERT_REMIND_DAYS", 14, minimum=0)
RECERT_CHECK_SECONDS = env_int("RECERT_CHECK_SECONDS", 300, minimum=5)
# A retired agent's platform that cannot be reached is asked again this many times (backoff
# 1, 2, 4 ... s), then the approvers get an escalation to stop it by hand.
RETIRE_STOP_MAX_RETRIES = env_int("RETIRE_STOP_MAX_RETRIES", 5, minimum=0)

# Single sign-on with OpenID Connect (README, "Single sign-on"): on when OIDC_CLIENT_ID is set.
# Endpoints come from the issuer's discovery document on first use, or each is set explicitly.
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "your identity provider")
OIDC_ISSUER = env_url("OIDC_ISSUER", {"https", "http"})
OIDC_DISCOVERY_URL = env_url("OIDC_DISCOVERY_URL", {"https", "http"})
OIDC_OP_AUTHORIZATION_ENDPOINT = env_url("OIDC_AUTHORIZATION_ENDPOINT", {"https", "http"})
OIDC_OP_TOKEN_ENDPOINT = env_url("OIDC_TOKEN_ENDPOINT", {"https", "http"})
OIDC_OP_USER_ENDPOINT = env_url("OIDC_USERINFO_ENDPOINT", {"https", "http"})
OIDC_OP_JWKS_ENDPOINT = env_url("OIDC_JWKS_ENDPOINT", {"https", "http"})
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID", "") or ""
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_CLIENT_SECRET", "", min_length=16) or ""
OIDC_RP_SCOPES = " ".join(env_list("OIDC_SCOPES", ["openid", "email", "profile", "groups"]))
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGORITHM", "RS256")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
# The callback URL registered at the provider; unset, it is built from the request's host.
OIDC_REDIRECT_URI = env_url("OIDC_REDIRECT_URI", {"https", "http"})
OIDC_ROLE_MAP = env_role_map("OIDC_ROLE_MAP")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT_SECONDS", 10, minimum=1)
OIDC_CREATE_USER = True
OIDC_AUTHENTICATE_CLASS = "console.signin_pages.SignInRequestView"
OIDC_CALLBACK_CLASS = "console.signin_pages.SignInCallbackView"
OIDC_REDIRECT_ALLOWED_HOSTS: list[str] = []
LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=failed"
if OIDC_RP_CLIENT_ID and not (OIDC_ISSUER or OIDC_DISCOVERY_URL):
    raise SettingError("OIDC_CLIENT_ID needs OIDC_ISSUER (or OIDC_DISCOVERY_URL) to be set")
if OIDC_RP_CLIENT_ID and not OIDC_RP_CLIENT_SECRET:
    raise SettingError("OIDC_CLIENT_ID needs OIDC_CLIENT_SECRET to be set")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "registry.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # The API's bodies are JSON (or the raw text a view reads itself): a form's values are all
    # text, which config/strict_input.py would have to convert; a form is refused with 415.
    "DEFAULT_PARSER_CLASSES": ["config.parsers.SafeJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "config.api_errors.exception_handler",
    # `?format=` names the export format (jsonl, csv), not a DRF renderer.
    "URL_FORMAT_OVERRIDE": None,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Agent governance control plane API",
    "DESCRIPTION": "Desired state, observed state, drift, corrections and the audit trail.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from the installed package, never a CDN: the product works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.schema.add_error_responses",
        "config.schema.close_request_bodies",
    ],
}

DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_BODY_BYTES", 1_048_576, minimum=1024)

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
if not DEBUG:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    # A load balancer's or supervisor's probe asks each web process directly over plain HTTP;
    # the probes carry nothing private (/metrics is not among them).
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Every page's script and style comes from our own origin as files: no inline script, no inline
# style, no eval, so markup an attacker slips into a page cannot run. The websocket is
# same-origin ('self' covers ws/wss in CSP Level 3); plotly and Swagger UI draw images as data:.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        # Only plotly's own two <style> elements (an empty one it fills through the CSSOM, and
        # its bundled map CSS), pinned by hash: a change of plotly fails the browser tests.
        "style-src": [SELF, "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='",
                      "'sha256-ji27qzEtxXZW+7dun6UwjHXJ18e6WAin1VvNtkzIE/o='"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# The SIEM stream (siem/): where sinks may be (same entries as DECISION_WEBHOOK_HOSTS; empty: no
# sink can be sent to), records per batch, tries within one run, the longest backoff between
# failed runs, one send's timeout, and how often the cron runs delivery (for kicks lost).
SIEM_ALLOWED_HOSTS = env_allow_list("SIEM_ALLOWED_HOSTS")
SIEM_BATCH_SIZE = env_int("SIEM_BATCH_SIZE", 500, minimum=1)
SIEM_RETRY_ATTEMPTS = env_int("SIEM_RETRY_ATTEMPTS", 3, minimum=1)
SIEM_RETRY_MAX_SECONDS = env_int("SIEM_RETRY_MAX_SECONDS", 300, minimum=1)
SIEM_TIMEOUT_SECONDS = env_int("SIEM_TIMEOUT_SECONDS", 10, minimum=1)
SIEM_POLL_SECONDS = env_int("SIEM_POLL_SECONDS", 30, minimum=1)

# Approvals in Slack (chat/): the app's signing secret (checks every click), the incoming
# webhook messages are posted to, where Slack's response URLs may be (allow-list), how old a
# signed request may be, and how long a link code lives.
SLACK_SIGNING_SECRET = env_secret("SLACK_SIGNING_SECRET", "", min_length=16) or ""
SLACK_WEBHOOK_URL = env_url("SLACK_WEBHOOK_URL", {"http", "https"}) or ""
SLACK_ALLOWED_HOSTS = env_allow_list("SLACK_ALLOWED_HOSTS")
SLACK_REQUEST_MAX_AGE_SECONDS = env_int("SLACK_REQUEST_MAX_AGE_SECONDS", 300, minimum=1)
CHAT_LINK_CODE_MINUTES = env_int("CHAT_LINK_CODE_MINUTES", 10, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # axes logs every failed sign-in at INFO; the audit trail has them, lockouts stay WARNING.
    "loggers": {"django.channels.server": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}
