# SPDX-License-Identifier: Apache-2.0
"""Moto's EC2 server on 127.0.0.1, for the AWS source tests and bench/inventory_scale.py.

moto answers the real EC2 Query API over HTTP and serialises with botocore's own service
model, so the source's real boto3 clients get the documented shapes (Reservations/Instances,
NextToken, EC2's <Response><Errors> XML). It runs in this process (``ThreadedMotoServer``),
which lets ``MotoEc2`` fill in, on moto's model objects, what moto 5.2.1 does not represent:

- ``Placement.GroupName``: RunInstances ignores it and CreatePlacementGroup is not implemented;
- ``InterfaceType`` of network interfaces: always ``interface``; ``launch(efa=N)`` sets ``efa``
  / ``efa-only`` on the instance's interfaces after launching it.

Other differences from AWS that tests must know:
- moto pages DescribeInstances by reservations, AWS by instances: ``bulk_launch`` makes one
  reservation per instance (as Auto Scaling launches do), so both count the same;
- no throttling: ``FailFirst`` is a botocore ``before-send`` handler that answers EC2's error
  XML (RequestLimitExceeded, AuthFailure, UnauthorizedOperation, ...) before the request leaves;
- IAM is off until ``enforce_iam()``: then moto checks signatures (AuthFailure for an unknown
  key) and IAM policies, and answers ``AccessDenied`` where EC2 answers ``UnauthorizedOperation``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import urllib.request
from collections import Counter
from typing import Any
from urllib.parse import parse_qs

import boto3
from botocore.awsrequest import AWSResponse
from moto.backends import get_backend
from moto.server import ThreadedMotoServer

ACCOUNT_ID = "123456789012"  # moto's default account
ACCESS_KEY = "AKIAFAKEADMINKEY0000"
SECRET_KEY = "fake-admin-secret-key"
IMAGE_ID = "ami-0123456789abcdef0"

# moto loads ~1200 default AMIs per region and scans them for every instance it launches:
# without them launching is 10 times faster.
MOTO_ENV = {"MOTO_EC2_LOAD_DEFAULT_AMIS": "false"}


class MotoEc2:
    """moto's server on a free 127.0.0.1 port, with helpers to build a fleet on it."""

    def __init__(self) -> None:
        self._server: ThreadedMotoServer | None = None
        self._subnets: dict[str, str] = {}  # zone -> its default subnet
        self.url = ""

    def start(self) -> MotoEc2:
        os.environ.update(MOTO_ENV)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        self.reset()
        return self

    def close(self) -> None:
        if self._server:
            self.reset()  # moto's state is global to the process: leave none behind
            self._server.stop()
            self._server = None

    def __enter__(self) -> MotoEc2:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.close()

    def reset(self) -> None:
        self.enforce_iam(False)
        self._post("/moto-api/reset", b"")
        self._subnets.clear()

    def enforce_iam(self, on: bool = True) -> None:
        """Make moto check signatures and IAM policies from the next request on (or stop checking)."""
        self._post("/moto-api/reset-auth", b"0" if on else b"inf")

    def _post(self, path: str, body: bytes) -> bytes:
        request = urllib.request.Request(
            self.url + path, data=body, method="POST", headers={"Content-Type": "text/plain"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read()

    def client(self, region: str = "us-east-1", service: str = "ec2") -> Any:
        return boto3.session.Session().client(
            service,
            region_name=region,
            endpoint_url=self.url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def backend(self, region: str) -> Any:
        """moto's in-process EC2 model of ``region``."""
        return get_backend("ec2")[ACCOUNT_ID][region]

    def launch(
        self,
        region: str,
        instance_type: str,
        count: int = 1,
        *,
        zone: str | None = None,
        name: str | None = None,
        tags: dict[str, str] | None = None,
        efa: int = 0,
        efa_only: bool = True,
        placement_group: str | None = None,
    ) -> list[str]:
        """Launch ``count`` instances with RunInstances; returns their ids.

        ``efa``: EFA interfaces per instance, on network cards 0..efa-1; the first is ``efa``, the
        others ``efa-only`` (as on p5) unless ``efa_only`` is False (all ``efa``, as on p4d).
        """
        zone = zone or f"{region}a"
        all_tags = {**({"Name": name} if name else {}), **(tags or {})}
        request: dict[str, Any] = {
            "ImageId": IMAGE_ID,
            "InstanceType": instance_type,
            "Placement": {"AvailabilityZone": zone},
        }
        if all_tags:
            tag_list = [{"Key": key, "Value": value} for key, value in all_tags.items()]
            request["TagSpecifications"] = [{"ResourceType": "instance", "Tags": tag_list}]
        if placement_group:
            request["Placement"]["GroupName"] = placement_group
        ids: list[str] = []
        if efa:
            # With explicit interfaces moto launches one instance per call reliably.
            subnet = self.default_subnet(region, zone)
            request["NetworkInterfaces"] = [
                {"DeviceIndex": card, "NetworkCardIndex": card, "SubnetId": subnet, "InterfaceType": "efa"}
                for card in range(efa)
            ]
            for _index in range(count):
                ids += self._run(region, request, 1)
        else:
            ids = self._run(region, request, count)
        for instance_id in ids:
            if placement_group:
                self.backend(region).get_instance(instance_id).placement.group_name = placement_group
            if efa:
                self.mark_efa(region, instance_id, efa_only)
        return ids

    def _run(self, region: str, request: dict[str, Any], count: int) -> list[str]:
        answer = self.client(region).run_instances(MinCount=count, MaxCount=count, **request)
        return [instance["InstanceId"] for instance in answer["Instances"]]

    def default_subnet(self, region: str, zone: str) -> str:
        if zone not in self._subnets:
            for subnet in self.client(region).describe_subnets()["Subnets"]:
                if subnet.get("DefaultForAz"):
                    self._subnets[subnet["AvailabilityZone"]] = str(subnet["SubnetId"])
        return self._subnets[zone]

    def mark_efa(self, region: str, instance_id: str, efa_only: bool = True) -> None:
        """Make every interface of the instance an EFA: ``efa`` on card 0, ``efa-only`` elsewhere."""
        for interface in self.backend(region).enis.values():
            if interface.instance is not None and interface.instance.id == instance_id:
                first = interface.device_index == 0
                interface.interface_type = "efa" if first or not efa_only else "efa-only"

    def bulk_launch(
        self,
        region: str,
        instance_types: list[str],
        count: int,
        *,
        efa_types: frozenset[str] = frozenset(),
        placement_group_size: int = 0,
        stop_every: int = 0,
    ) -> list[str]:
        """``count`` instances in zone ``<region>a``, one reservation each, cycling through ``instance_types``.

        Instances of ``efa_types`` get an ``efa`` primary interface and, when
        ``placement_group_size`` is set, go into placement groups of that many; every
        ``stop_every``-th instance is stopped. Straight on moto's model: over HTTP moto's XML
        serialiser costs ~7 ms per instance. No root volume (moto attaches it with a scan of all
        instances, quadratic in the fleet) and no instance type check (moto scans its catalogue
        of offerings on every launch).
        """
        backend = self.backend(region)
        ids = []
        grouped = 0
        for index in range(count):
            instance_type = instance_types[index % len(instance_types)]
            reservation = backend.run_instances(
                IMAGE_ID,
                1,
                None,
                [],
                instance_type=instance_type,
                is_instance_type_default=True,
                block_device_mappings=[],
                region_name=region,
            )
            instance = reservation.instances[0]
            if instance_type in efa_types:
                for interface in instance.nics.values():
                    interface.interface_type = "efa"
                if placement_group_size:
                    instance.placement.group_name = f"{region}-pg-{grouped // placement_group_size}"
                    grouped += 1
            if stop_every and index % stop_every == stop_every - 1:
                instance.stop()
            ids.append(instance.id)
        return ids

    def stop_instances(self, region: str, ids: list[str]) -> None:
        self.client(region).stop_instances(InstanceIds=ids)

    def terminate_instances(self, region: str, ids: list[str]) -> None:
        self.client(region).terminate_instances(InstanceIds=ids)

    def create_user(self, name: str, actions: list[str]) -> tuple[str, str]:
        """An IAM user allowed only ``actions``; returns its (access key id, secret key)."""
        iam = self.client(service="iam")
        iam.create_user(UserName=name)
        if actions:
            statement = {"Effect": "Allow", "Action": actions, "Resource": "*"}
            policy = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
            iam.put_user_policy(UserName=name, PolicyName=f"{name}-policy", PolicyDocument=policy)
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    # moto's request recorder: the server appends every request to MOTO_RECORDER_FILEPATH
    # (read when moto is imported) between start and stop.
    def start_recording(self) -> None:
        self._post("/moto-api/recorder/reset-recording", b"")
        self._post("/moto-api/recorder/start-recording", b"")

    def stop_recording(self) -> Counter[str]:
        """Stop recording; the recorded EC2 requests by Action (each HTTP attempt counts)."""
        self._post("/moto-api/recorder/stop-recording", b"")
        with urllib.request.urlopen(self.url + "/moto-api/recorder/download-recording", timeout=60) as response:
            lines = response.read().decode().splitlines()
        actions: Counter[str] = Counter()
        for line in lines:
            entry = json.loads(line)
            body = entry.get("body") or ""
            if entry.get("body_encoded"):
                body = base64.b64decode(body).decode()
            actions.update(parse_qs(body).get("Action", ["(no Action)"]))
        return actions


class _Body:
    def __init__(self, content: bytes) -> None:
        self.content = content

    def stream(self, **_: Any) -> Any:
        yield self.content


def ec2_error(status: int, code: str, message: str) -> AWSResponse:
    """An EC2 error response as AWS sends it (Query API: <Response><Errors><Error>)."""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
        "<RequestID>5ee1ce7c-30f6-4a1c-8e0b-3f6b2a0a7e11</RequestID></Response>"
    ).encode()
    headers = {"Content-Type": "text/xml;charset=UTF-8", "Content-Length": str(len(body))}
    return AWSResponse("https://ec2.amazonaws.com/", status, headers, _Body(body))


class FailFirst:
    """A botocore ``before-send`` handler: answers the first ``times`` requests with an EC2 error.

    Register it with ``client.meta.events.register("before-send.ec2.DescribeInstances", handler)``;
    ``attempts`` counts every request it saw, failed or let through.
    """

    def __init__(self, times: float, status: int, code: str, message: str) -> None:
        self.times, self.status, self.code, self.message = times, status, code, message
        self.attempts = 0

    def __call__(self, **_: Any) -> AWSResponse | None:
        self.attempts += 1
        if self.attempts <= self.times:
            return ec2_error(self.status, self.code, self.message)
        return None
