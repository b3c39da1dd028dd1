"""The settings of the processes the tests start (`child_env`): the product's own, with the
suite's password hasher first, as in the tests' own process. PBKDF2's deliberate cost (a
million rounds, ~0.3-0.5 s of CPU a hash) bought nothing here: each browser test re-hashed
the personas' passwords with it and its web process checked each sign-in with it (~3% of the
suite's CPU). The product's hashers follow, so a password hashed as deployed still signs in
(tests/test_reverse_proxy.py)."""

from django.conf import global_settings

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher",
                    *global_settings.PASSWORD_HASHERS]
