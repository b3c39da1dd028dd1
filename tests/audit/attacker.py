"""What an attacker with the database password does before editing stored entries: switch off
the append-only triggers (each test does) and drop the constraint that holds an entry's columns to
its hashed payload (audit/binding.py), so a column can say what its payload does not."""

DROP_BINDING = ("ALTER TABLE audit_auditentry DROP CONSTRAINT IF EXISTS "
                "audit_entry_columns_match_payload")


def unbind_columns() -> None:
    """Drop the constraint (PostgreSQL: elsewhere there is none to drop)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(DROP_BINDING)
