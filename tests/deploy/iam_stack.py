"""`imposer local` that judges requests by IAM policy like AWS does, and writes down each verdict.

Run as ``python -m tests.deploy.iam_stack --port 0 --decisions FILE``; it prints
``AWS_ENDPOINT_URL=...`` like ``imposer local``. Authorization starts off, so
a test can create tables, users and policies with any key; it switches on
with moto's own ``POST /moto-api/reset-auth`` (body ``0``).

moto's IAM evaluation is close to AWS's for S3 (object and bucket ARNs) and
SQS, but not for everything imposer uses. This process patches moto, in
itself only, so the verdicts are the ones AWS would give:

* DynamoDB: moto checks every request against the resource ``*``, so a
  statement scoped to a table never matches. Here a request is checked
  against its table's ARN, a Query or Scan of an index against
  ``table/T/index/I``, a ``TransactWriteItems`` item by item as
  ``PutItem``/``UpdateItem``/``DeleteItem``/``ConditionCheckItem`` on that
  item's table (there is no IAM action ``TransactWriteItems``), and a
  ``BatchGetItem`` once per table.
* SQS ``GetQueueUrl`` is checked against the queue's ARN (moto: ``*``).
* SSM ``GetParameter`` is checked against the parameter's ARN (moto: ``*``), so a
  host's bootstrap policy scoped to its own licence parameter is judged as AWS would.
* CloudWatch Logs requests naming a log group are checked against
  ``log-group:NAME`` (moto: ``*``); the template grants that form and ``NAME:*``.
* S3 is judged by the IAM action moto's ``ACTION_MAP`` names (``GetObject`` for a
  ``HeadObject``), as moto did before 5.2.6; since then moto judges by the API
  operation's name, which is no IAM action, so every grant missed.
* S3 ``HeadBucket`` needs ``s3:ListBucket`` (moto asks for ``s3:HeadBucket``,
  which is not an IAM action), ``CopyObject`` also needs ``s3:GetObject``
  on its source (moto checks the destination only), and reading a bucket's
  encryption, ownership controls or public access block needs
  ``s3:GetEncryptionConfiguration``, ``s3:GetBucketOwnershipControls`` and
  ``s3:GetBucketPublicAccessBlock`` (moto asks for ``s3:ListBucket`` or a
  name that is no IAM action).

What stays out of reach is said in docs/deploy-on-aws.rst, "What the local stack cannot
check": conditions
(moto treats a statement whose condition it cannot evaluate as a deny),
policy variables, resource-based policies, and S3 answering 403 instead of
404 for a missing key without ``s3:ListBucket``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import urllib.parse

from imposer.dev.localstack.stack import LocalStack


class Decisions:
    """Append one JSON line per authorization verdict: principal, action, resource, allowed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def write(self, principal: str, action: str, resource: str, allowed: bool) -> None:
        line = json.dumps({"principal": principal, "action": action, "resource": resource,
                           "allowed": allowed})
        with self.lock, open(self.path, "a") as out:
            out.write(line + "\n")


def dynamodb_checks(operation: str, body: dict, region: str, account: str) -> list[tuple]:
    """Return the (IAM action, resource ARN) pairs AWS authorizes one DynamoDB request by."""
    def arn(table: str, index: str | None = None) -> str:
        base = f"arn:aws:dynamodb:{region}:{account}:table/{table}"
        return f"{base}/index/{index}" if index else base

    if operation == "TransactWriteItems":
        return [(f"{kind}Item", arn(entry[kind]["TableName"]))
                for entry in body.get("TransactItems", []) for kind in entry]
    if operation == "TransactGetItems":
        return [("GetItem", arn(entry["Get"]["TableName"]))
                for entry in body.get("TransactItems", [])]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [(operation, arn(table)) for table in body.get("RequestItems", {})]
    if "TableName" in body:
        return [(operation, arn(body["TableName"], body.get("IndexName")))]
    return [(operation, "*")]


def patch_moto(decisions: Decisions) -> None:
    """Make moto authorize DynamoDB, SQS, SSM, Logs and S3 requests by AWS's rules, and record verdicts."""
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.dynamodb.responses import DynamoHandler
    from moto.iam.access_control import IAMRequest, IAMRequestBase, S3IAMRequest
    from moto.s3 import responses as s3_responses
    from moto.sqs.exceptions import QueueDoesNotExist
    from moto.sqs.responses import SQSResponse
    from moto.logs.responses import LogsResponse
    from moto.ssm.responses import SimpleSystemManagerResponse

    checked = IAMRequestBase.check_action_permitted

    def check_and_record(self, resource: str) -> None:
        try:
            checked(self, resource)
        except Exception:
            decisions.write(self._access_key.arn, self._action, resource, False)
            raise
        decisions.write(self._access_key.arn, self._action, resource, True)

    IAMRequestBase.check_action_permitted = check_and_record

    def authorize_dynamodb(self, resource: str = "*") -> None:
        if ActionAuthenticatorMixin.request_count < settings.INITIAL_NO_AUTH_ACTION_COUNT:
            ActionAuthenticatorMixin.request_count += 1
            return
        path = self.raw_path + ("?" + urllib.parse.urlparse(self.uri).query
                                if urllib.parse.urlparse(self.uri).query else "")
        for action, arn in dynamodb_checks(self._get_action(), self.body or {}, self.region,
                                           self.current_account):
            request = IAMRequest(account_id=self.current_account, method=self.method,
                                 path=path, data=self.data, body=self.raw_body,
                                 headers=self.headers, action=action)
            request.check_signature()
            request.check_action_permitted(arn)

    DynamoHandler._authenticate_and_authorize_normal_action = authorize_dynamodb

    queue_resource = SQSResponse._determine_resource

    def sqs_resource(self) -> str:
        if self._get_action() == "GetQueueUrl":
            try:
                return self.sqs_backend.get_queue(self._get_param("QueueName")).queue_arn
            except QueueDoesNotExist:
                return "*"
        return queue_resource(self)

    SQSResponse._determine_resource = sqs_resource

    def ssm_resource(self) -> str:
        name = self._get_param("Name") if self._get_action() == "GetParameter" else None
        if not name:
            return "*"
        return f"arn:aws:ssm:{self.region}:{self.current_account}:parameter/{name.lstrip('/')}"

    SimpleSystemManagerResponse._determine_resource = ssm_resource

    def logs_resource(self) -> str:
        group = self._get_param("logGroupName")
        if not group:
            return "*"
        return f"arn:aws:logs:{self.region}:{self.current_account}:log-group:{group}"

    LogsResponse._determine_resource = logs_resource

    # moto >= 5.2.6 names the action of every request by its API operation (HeadObject,
    # GetBucketLifecycleConfiguration), no longer by the IAM action its ACTION_MAP sets in
    # ``data["Action"]`` (GetObject, GetLifecycleConfiguration); judge S3 by the latter.
    authorize_s3 = s3_responses.S3Response._authenticate_and_authorize_action

    def authorize_s3_by_iam_action(self, iam_request_cls: type, resource: str = "*") -> None:
        action = self.data.get("Action")
        if action:
            self._get_action = lambda: action  # this request only; serializing is untouched
        try:
            authorize_s3(self, iam_request_cls, resource)
        finally:
            self.__dict__.pop("_get_action", None)

    s3_responses.S3Response._authenticate_and_authorize_action = authorize_s3_by_iam_action
    s3_responses.ACTION_MAP["BUCKET"]["HEAD"]["DEFAULT"] = "ListBucket"
    # Bucket settings moto judges as ListBucket (it knows no such sub-resource) or under a
    # name that is not an IAM action.
    s3_responses.ACTION_MAP["BUCKET"]["GET"].update({
        "encryption": "GetEncryptionConfiguration",
        "ownershipControls": "GetBucketOwnershipControls",
        "publicAccessBlock": "GetBucketPublicAccessBlock"})
    put_key = s3_responses.S3Response._key_response_put

    def put_or_copy(self, query, key_name):
        source = self.headers.get("x-amz-copy-source")
        if source and not query.get("uploadId"):
            bucket, _, key = urllib.parse.unquote(source).lstrip("/").partition("/")
            self.data["Action"] = "GetObject"
            self._authenticate_and_authorize_action(
                S3IAMRequest, f"arn:aws:s3:::{bucket}/{key.split('?')[0]}")
        return put_key(self, query, key_name)

    s3_responses.S3Response._key_response_put = put_or_copy


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--decisions", required=True, help="JSON-lines file of verdicts")
    args = parser.parse_args(argv)
    patch_moto(Decisions(args.decisions))
    stack = LocalStack(args.port)
    print(f"AWS_ENDPOINT_URL={stack.url}", flush=True)
    try:
        stack.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
