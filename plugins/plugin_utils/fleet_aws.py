# SPDX-License-Identifier: Apache-2.0
"""AWS fleet source: every EC2 instance of the given regions, through boto3.

One paginated ``DescribeInstances`` per region (1000 instances a page) is all
it needs: the EFA count comes from the network interfaces that
``DescribeInstances`` already returns with each instance (``InterfaceType``
``efa`` or ``efa-only``), so the API calls grow with pages, never with
instances, and the only permission needed is ``ec2:DescribeInstances``.

Throttling (``RequestLimitExceeded``, ``Throttling``, HTTP 429/503) and
dropped connections are retried by botocore's own retry modes; every other
failure becomes one ``DiscoveryError`` that says what to do.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import (
    CALL_RETRIES,
    CALL_TIMEOUT_S,
    OTHER,
    PENDING,
    RUNNING,
    STOPPED,
    DiscoveryError,
    Instance,
    missing_sdk,
)

CLOUD = "aws"
PAGE_SIZE = 1000  # the most DescribeInstances accepts (5 to 1000)
RETRY_MODES = ("standard", "adaptive")
EFA_INTERFACE_TYPES = frozenset({"efa", "efa-only"})
STATES = {"running": RUNNING, "stopped": STOPPED, "stopping": STOPPED, "pending": PENDING}

# Error codes EC2 (and the STS/IAM layer in front of it) answers with.
CREDENTIAL_ERRORS = frozenset(
    {
        "AuthFailure",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
    }
)
PERMISSION_ERRORS = frozenset({"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"})
THROTTLING_ERRORS = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException", "EC2ThrottledException"})


class AwsSource:
    """Every EC2 instance (all states) in ``regions``.

    Options:
      regions: region names to list, e.g. ``["us-east-1", "eu-west-1"]``.
      endpoint_url: EC2 endpoint to use instead of AWS's (a VPC endpoint, a test server).
      profile: a profile of the shared AWS config/credentials files.
      access_key_id, secret_access_key, session_token: explicit credentials; when none of these
        and no profile is given, boto3's usual chain applies (environment, shared config, SSO,
        container or instance role).
      max_attempts: attempts per API call, first one included, when AWS throttles, a
        connection drops or an answer times out (botocore retry modes, exponential backoff
        with jitter); default 3 (fleet_base.CALL_RETRIES + 1).
      retry_mode: ``standard`` or ``adaptive`` (adaptive also slows the client down when throttled).
      connect_timeout, read_timeout: seconds per attempt, default 10 (fleet_base.CALL_TIMEOUT_S):
        an endpoint that accepts and never answers fails within max_attempts x read_timeout
        plus the backoff.

    ``api_calls`` counts the API operations made, by name (retries of one call count once).
    """

    cloud = CLOUD

    def __init__(
        self,
        regions: list[str],
        endpoint_url: str | None = None,
        profile: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        max_attempts: int = CALL_RETRIES + 1,
        retry_mode: str = "standard",
        connect_timeout: float = CALL_TIMEOUT_S,
        read_timeout: float = CALL_TIMEOUT_S,
    ) -> None:
        if isinstance(regions, str) or not regions:
            raise DiscoveryError(CLOUD, "regions must be a non-empty list of region names, e.g. [us-east-1]")
        if retry_mode not in RETRY_MODES:
            raise DiscoveryError(
                CLOUD, f"retry_mode {retry_mode!r} is not accepted; accepted: {', '.join(RETRY_MODES)}"
            )
        if max_attempts < 1:
            raise DiscoveryError(CLOUD, f"max_attempts must be 1 or more, not {max_attempts}")
        if bool(access_key_id) != bool(secret_access_key):
            raise DiscoveryError(CLOUD, "access_key_id and secret_access_key must be given together")
        if profile and access_key_id:
            raise DiscoveryError(CLOUD, "give either a profile or access keys, not both")
        self.regions = list(regions)
        self.endpoint_url = endpoint_url
        self.profile = profile
        self.max_attempts = max_attempts
        self.retry_mode = retry_mode
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._credentials = {
            "aws_access_key_id": access_key_id,
            "aws_secret_access_key": secret_access_key,
            "aws_session_token": session_token,
        }
        self._secrets = [value for value in (access_key_id, secret_access_key, session_token) if value]
        self._session: Any = None
        self._clients: dict[str, Any] = {}
        self.api_calls: Counter[str] = Counter()

    def instances(self) -> Iterator[Instance]:
        for region in self.regions:
            client = self.client(region)
            for reservation in self._reservations(client, region):
                owner_id = reservation.get("OwnerId")
                for raw in reservation.get("Instances", []):
                    yield to_instance(raw, region, owner_id)

    def client(self, region: str) -> Any:
        """The EC2 client for ``region`` (made once): tests and benchmarks hook its events."""
        if region not in self._clients:
            _boto3, config_class = load_sdk()
            config = config_class(
                # total_max_attempts counts the first attempt; botocore's max_attempts does not.
                retries={"mode": self.retry_mode, "total_max_attempts": self.max_attempts},
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
                user_agent_extra="gpufabric",
            )
            with self._errors(region, self.endpoint_url or f"the EC2 endpoint of {region}"):
                client = self._boto_session().client(
                    "ec2", region_name=region, endpoint_url=self.endpoint_url, config=config
                )
            client.meta.events.register("before-call.ec2", self._count_call)
            self._clients[region] = client
        return self._clients[region]

    def _boto_session(self) -> Any:
        if self._session is None:
            boto3, _config_class = load_sdk()
            with self._errors(None, None):
                self._session = boto3.session.Session(profile_name=self.profile, **self._credentials)
        return self._session

    def _count_call(self, model: Any, **_: Any) -> None:
        self.api_calls[model.name] += 1

    def _reservations(self, client: Any, region: str) -> Iterator[dict[str, Any]]:
        pages = client.get_paginator("describe_instances").paginate(PaginationConfig={"PageSize": PAGE_SIZE})
        with self._errors(region, client.meta.endpoint_url):
            for page in pages:
                # Every EC2 answer carries a request id; a page without one came from something that
                # is not EC2 (a proxy's login page, a web server) and would read as "no instances".
                if "Reservations" not in page or not page.get("ResponseMetadata", {}).get("RequestId"):
                    raise DiscoveryError(
                        CLOUD,
                        f"{client.meta.endpoint_url} in {region} did not answer as the EC2 API "
                        "(no Reservations, no request id): check endpoint_url",
                    )
                yield from page["Reservations"]

    @contextmanager
    def _errors(self, region: str | None, endpoint: str | None) -> Iterator[None]:
        """Any botocore error raised inside the block becomes one DiscoveryError."""
        from botocore.exceptions import BotoCoreError, ClientError
        from botocore.parsers import ResponseParserError  # not a BotoCoreError: an answer that is not EC2's

        try:
            yield
        except (BotoCoreError, ClientError, ResponseParserError) as exc:
            raise DiscoveryError(CLOUD, self.redact(explain_failure(exc, self, region, endpoint))) from exc

    def redact(self, text: str) -> str:
        """``text`` with the explicit credentials blanked out (AWS does not echo them, but be sure)."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def load_sdk() -> tuple[Any, Any]:
    """boto3 and botocore's Config, imported only when a source is used."""
    try:
        import boto3
        import boto3.session
        from botocore.config import Config
    except ImportError:
        raise missing_sdk(CLOUD, "boto3", "aws") from None
    return boto3, Config


def to_instance(raw: dict[str, Any], region: str, owner_id: str | None) -> Instance:
    """One ``Reservations[].Instances[]`` item of DescribeInstances as an Instance."""
    instance_id = raw["InstanceId"]
    tags = {tag["Key"]: tag.get("Value", "") for tag in raw.get("Tags", [])}
    placement = raw.get("Placement", {})
    return Instance(
        cloud=CLOUD,
        instance_id=instance_id,
        name=tags.get("Name") or instance_id,
        instance_type=raw.get("InstanceType", ""),
        state=STATES.get(raw.get("State", {}).get("Name", ""), OTHER),
        region=region,
        zone=placement.get("AvailabilityZone"),
        private_ip=raw.get("PrivateIpAddress"),
        public_ip=raw.get("PublicIpAddress"),
        # AWS answers GroupName "" for an instance outside any placement group.
        placement=placement.get("GroupName") or None,
        tags=tags,
        ids={"owner_id": owner_id} if owner_id else {},
        extra={
            "efa_interfaces": efa_interfaces(raw),
            "vpc_id": raw.get("VpcId"),
            "subnet_id": raw.get("SubnetId"),
            "image_id": raw.get("ImageId"),
        },
    )


def efa_interfaces(raw: dict[str, Any]) -> int:
    """EFA interfaces attached to the instance: ``efa`` (EFA with IP) and ``efa-only`` (no IP)."""
    return sum(1 for nic in raw.get("NetworkInterfaces", []) if nic.get("InterfaceType") in EFA_INTERFACE_TYPES)


def explain_failure(exc: BaseException, source: AwsSource, region: str | None, endpoint: str | None) -> str:
    """One sentence: what failed and what to do."""
    from botocore import exceptions as errors

    where = f" in {region}" if region else ""
    if isinstance(exc, errors.ClientError):
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "Unknown"), error.get("Message", "")
        action = f"ec2:{exc.operation_name}"
        if code in CREDENTIAL_ERRORS:
            return (
                f"credentials were rejected by EC2{where} ({code}): check the access key and secret key, "
                "or the profile, and renew expired session credentials"
            )
        if code in PERMISSION_ERRORS:
            return f"permission denied{where} ({code}): allow {action} for this user or role (read-only, resource *)"
        if code in THROTTLING_ERRORS:
            return (
                f"EC2 still throttled {exc.operation_name}{where} ({code}) after {source.max_attempts} attempts; "
                "try again later or raise max_attempts"
            )
        at = f" (from {endpoint})" if endpoint else ""
        return f"EC2 {exc.operation_name} failed{where}: {code}: {message}{at}"
    if type(exc).__name__ == "ResponseParserError":
        # Its text ends with the whole body received: name the parser's reason only.
        found = re.search(r"\((.*?)\)", str(exc))
        reason = found.group(1) if found else "unreadable"
        return (
            f"{endpoint}{where} did not answer as the EC2 API (an empty, truncated or non-XML answer: {reason}); "
            "check endpoint_url and proxy settings"
        )
    if isinstance(exc, errors.NoCredentialsError):
        return (
            "no AWS credentials found (environment, shared config, or instance role); set AWS_PROFILE or "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or give the profile or access key options"
        )
    if isinstance(exc, errors.ProfileNotFound):
        return f"AWS profile {source.profile!r} was not found in the shared config and credentials files"
    if isinstance(exc, (errors.ConnectionError, errors.HTTPClientError)):
        return (
            f"cannot reach {endpoint}{where}: {connection_reason(exc)}; "
            "check endpoint_url, proxy settings and the network"
        )
    return f"EC2 request failed{where}: {exc}"


def connection_reason(exc: Any) -> str:
    """The low-level reason of a connection failure, without urllib3's object reprs."""
    cause = exc.kwargs.get("error") if hasattr(exc, "kwargs") else None
    reason = str(cause or exc)
    return re.sub(r"<[^>]*>:\s*", "", reason).strip() or type(exc).__name__
