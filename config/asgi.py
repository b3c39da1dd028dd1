"""ASGI entry point: HTTP through Django, websockets through Channels (origin-checked)."""

import gc
import os

from config import startup

startup.pause_collector()  # until django.setup() ends (config/startup.py)

import django  # noqa: E402

from config import process_role, web_shutdown  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Read by the settings: a web process keeps a pool of database sessions (DATABASE_POOL_SIZE).
process_role.role = process_role.WEB
django.setup(set_prefix=False)  # what get_asgi_application does, with our handler

from config.request_threads import KeptThreadsASGIHandler  # noqa: E402

django_asgi_app = KeptThreadsASGIHandler()
web_shutdown.end_when_the_server_stops()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from config.limits import WholeBodyMiddleware  # noqa: E402
from reconciliation.routing import websocket_urlpatterns  # noqa: E402
from registry.desired_long_poll import DesiredStateLongPoll  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": WholeBodyMiddleware(DesiredStateLongPoll(django_asgi_app)),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

# A web process keeps what it loaded at start (modules, settings, URL patterns, the app) for
# life: moved out of the cyclic collector's reach, so its collections stop walking them. And
# a young collection waits for 100,000 objects more made than freed: a request's objects are
# freed by their counts when it ends, so at 700 (Python's) or 7,000 young collections mostly
# walked the live objects of the requests in flight (two 1,000-event batches hold ~40,000)
# over and over: ~15% of a batch's Python time at 700, ~5% at 7,000, ~0.5% now; what waits
# is the little cyclic garbage requests leave (bench/RESULTS.md, 2026-12-07, twelfth session).
startup.resume_collector()  # (frozen) also where Django was set up before this module
gc.set_threshold(100_000, 10, 10)
