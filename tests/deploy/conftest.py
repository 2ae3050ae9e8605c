"""Fixtures of the deployment tests: an IAM-enforcing local stack and AWS environments."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Iterator

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Variables that pick the AWS endpoint and identity of a process.
AWS_KEYS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_PROFILE")


@attrs.frozen(kw_only=True)
class Identity:
    """An access key pair of the local stack, and the ARN its calls are judged as."""

    arn: str
    key: str
    secret: str
    #: The principal's unique id: what SQS stamps as SenderId on what it sends.
    user_id: str = ""

    def env(self, url: str) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": self.key,
                "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_DEFAULT_REGION": "us-east-1"}


#: What moto accepts while authorization is off (any key does).
ANYONE = Identity(arn="", key="testing", secret="testing")


@contextlib.contextmanager
def aws_as(url: str, identity: Identity) -> Iterator[None]:
    """Point this process's new AWS clients at *url* as *identity*, then put things back."""
    saved = {k: os.environ.get(k) for k in AWS_KEYS}
    for key in AWS_KEYS:
        os.environ.pop(key, None)
    os.environ.update(identity.env(url))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def tenant_statements(deployed, tenant: str) -> list[dict]:
    """TenantPolicyExample for one tenant: moto cannot evaluate policy variables, so fill it."""
    text = json.dumps(deployed.statements("TenantPolicyExample"))
    return json.loads(text.replace("${aws:PrincipalTag/imposer-tenant}", tenant))


def create_user(iam, name: str, statements: list[dict], tenant: str | None = None) -> Identity:
    tags = [{"Key": "imposer-tenant", "Value": tenant}] if tenant else []
    user = iam.create_user(UserName=name, Tags=tags)["User"]
    iam.put_user_policy(UserName=name, PolicyName="imposer", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": statements}))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return Identity(arn=user["Arn"], key=key["AccessKeyId"], secret=key["SecretAccessKey"],
                    user_id=user["UserId"])


@attrs.define
class IamStack:
    """The running IAM-enforcing stack: where it listens and the verdicts it wrote."""

    url: str
    decisions_path: Path
    proc: subprocess.Popen

    def enforce(self, on: bool = True) -> None:
        """Switch IAM authorization on (every request from now on) or off."""
        request = urllib.request.Request(f"{self.url}/moto-api/reset-auth", method="POST",
                                         data=b"0" if on else b"inf",
                                         headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert json.loads(reply.read())["status"] == "ok"

    def decisions(self, principal: str | None = None) -> list[dict]:
        if not self.decisions_path.exists():
            return []
        rows = [json.loads(line) for line in self.decisions_path.read_text().splitlines()]
        return [r for r in rows if principal is None or r["principal"] == principal]


@pytest.fixture(scope="module")
def iam_stack(tmp_path_factory) -> Iterator[IamStack]:
    """A local stack of its own (authorization is process-wide in moto) judging by IAM policy."""
    decisions = tmp_path_factory.mktemp("iam") / "decisions.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.deploy.iam_stack", "--port", "0",
         "--decisions", str(decisions)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("AWS_ENDPOINT_URL="):
        proc.kill()
        pytest.fail(f"the IAM stack did not start: {line!r}")
    yield IamStack(url=line.split("=", 1)[1], decisions_path=decisions, proc=proc)
    proc.terminate()
    proc.wait(timeout=10)
