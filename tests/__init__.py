import os

# A `db` test holds one transaction open while it runs (waiting on a browser, a venv's
# install): PostgreSQL's idle-in-transaction bound, set for processes cut off mid-transaction,
# stays off in the suite's own process and what it starts unless a test sets it
# (tests/test_across_hosts.py does, for its hosts). Imported before the settings are.
os.environ.setdefault("DATABASE_IDLE_IN_TRANSACTION_SECONDS", "0")
