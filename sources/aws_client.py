"""The AWS side of the IAM permission source (sources/aws_iam.py): an IAM client with the
source's credentials and short timeouts, and AWS's answers read as ours. A module of its own so
that boto3 (~0.3 s to import, and its memory) loads only in a process that reads or corrects an
AWS source: sources/aws_iam.py imports it on first use."""

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from config.permission_sources import Source
from reconciliation.connectors.base import ConnectorError, CorrectionRefused
from registry.connector_secrets import secret_value
from sources.postgres import SourceRefused


def client(source: Source) -> Any:
    """An IAM client with the source's credentials (its connector secret, KEY_ID:SECRET)."""
    keys = secret_value(source.secret) or ""
    key_id, _, secret = keys.partition(":")
    if not key_id or not secret:
        raise SourceRefused(f"permission source {source.name} has no credentials",
                            detail=f"connector secret {source.secret} is not KEY_ID:SECRET")
    return boto3.client("iam", aws_access_key_id=key_id, aws_secret_access_key=secret,
                        region_name="us-east-1", endpoint_url=source.endpoint_url or None,
                        config=Config(connect_timeout=5, read_timeout=10,
                                      retries={"max_attempts": 2}))


def call(source: Source, what: Any, role: str | None = None) -> Any:
    """Run `what`; AWS refusing the credentials is a CorrectionRefused, not knowing `role` a
    SourceRefused, not reaching it a ConnectorError."""
    try:
        return what()
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        message = error.response.get("Error", {}).get("Message", "")
        if code == "NoSuchEntity" and role is not None:
            raise SourceRefused(f"permission source {source.name} has no IAM role {role}",
                                detail=message, remedy="an admin binds the agent to the "
                                                       "IAM role its grants are made to"
                                ) from None
        if code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation",
                    "InvalidClientTokenId", "SignatureDoesNotMatch"):
            raise CorrectionRefused(f"the credentials of {source.name} were refused: {code} "
                                    f"{message}".strip()) from None
        raise ConnectorError(f"permission source {source.name} answered {code}",
                             detail=message) from None
    except BotoCoreError as error:
        raise ConnectorError(f"permission source {source.name} unreachable",
                             detail=str(error)) from None
