"""The local AWS stack: serializable DynamoDB, fair-queue delivery, SQS's SenderId, quiet logs."""

from __future__ import annotations

import boto3
import pytest


@pytest.fixture
def sqs(aws_endpoint, names):
    client = boto3.client("sqs")
    url = client.create_queue(QueueName=names["queue_name"])["QueueUrl"]
    return client, url


class TestFairQueues:
    def test_quiet_group_served_before_noisy_backlog(self, sqs):
        """A quiet group's message is delivered ahead of a group with many messages in flight."""
        client, url = sqs
        for n in range(20):
            client.send_message(QueueUrl=url, MessageBody=f"noisy-{n}", MessageGroupId="noisy")
        got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                     VisibilityTimeout=60)["Messages"]
        assert all(m["Body"].startswith("noisy") for m in got)
        client.send_message(QueueUrl=url, MessageBody="quiet-0", MessageGroupId="quiet")
        first = client.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"][0]
        assert first["Body"] == "quiet-0"

    def test_group_order_is_kept(self, sqs):
        """Within one group, messages still come in the order they were sent."""
        client, url = sqs
        for n in range(5):
            client.send_message(QueueUrl=url, MessageBody=str(n), MessageGroupId="g")
        got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=5)["Messages"]
        assert [m["Body"] for m in got] == ["0", "1", "2", "3", "4"]


class TestSenderId:
    def test_each_message_carries_its_senders_principal_as_sqs_does(self, sqs, names):
        """SenderId is what STS says of the sender's keys: a user's id, a role's id:session."""
        client, url = sqs
        iam = boto3.client("iam")
        sessions, want = [], []
        for n in range(2):
            user = iam.create_user(UserName=f"u{n}-{names['bucket']}")["User"]
            key = iam.create_access_key(UserName=user["UserName"])["AccessKey"]
            sessions.append(boto3.session.Session(
                aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"],
                region_name="us-east-1"))
            want.append(user["UserId"])
        role = iam.create_role(RoleName=f"r-{names['bucket']}", AssumeRolePolicyDocument="{}")
        creds = boto3.client("sts").assume_role(RoleArn=role["Role"]["Arn"],
                                                RoleSessionName="i-0host")["Credentials"]
        sessions.append(boto3.session.Session(
            aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"], region_name="us-east-1"))
        want.append(f"{role['Role']['RoleId']}:i-0host")
        for n, session in enumerate(sessions):
            session.client("sqs").send_message(QueueUrl=url, MessageBody=str(n))
            assert session.client("sts").get_caller_identity()["UserId"] == want[n]
        got = {}
        while len(got) < 3:
            for m in client.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                            MessageSystemAttributeNames=["SenderId"])["Messages"]:
                got[int(m["Body"])] = m["Attributes"]["SenderId"]
        assert [got[n] for n in range(3)] == want
        assert len(set(want)) == 3


class TestInit:
    def test_init_twice_is_idempotent(self, aws_endpoint, names, tmp_path):
        """`imposer init` twice: no error, the second run says everything exists."""
        import subprocess
        import sys

        from imposer.settings import Settings
        from imposer.state.provision import table_specs
        from tests.fixtures.aws import env_for

        settings = Settings.load({}, **names)
        env = env_for(settings)
        # two queues, every table the stores declare, one bucket
        resources = 2 + len(table_specs(settings)) + 1
        first = subprocess.run([sys.executable, "-m", "imposer", "init"], env=env,
                               capture_output=True, text=True)
        second = subprocess.run([sys.executable, "-m", "imposer", "init"], env=env,
                                capture_output=True, text=True)
        assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
        assert first.stdout.count("created") == resources
        assert "TTL on expires_at" in first.stdout
        assert second.stdout.count("exists") == resources and "created" not in second.stdout
        sqs = boto3.client("sqs")
        attrs_ = sqs.get_queue_attributes(
            QueueUrl=sqs.get_queue_url(QueueName=names["queue_name"])["QueueUrl"],
            AttributeNames=["All"])["Attributes"]
        assert attrs_["MessageRetentionPeriod"] == "1209600"
        assert '"maxReceiveCount": "1000"' in attrs_["RedrivePolicy"] or \
            '"maxReceiveCount": 1000' in attrs_["RedrivePolicy"]
        names_ = boto3.client("sqs").list_queues(QueueNamePrefix=names["queue_name"])["QueueUrls"]
        assert len(names_) == 2


class TestConditionalWrites:
    def test_a_copy_onto_an_object_with_if_none_match_is_refused_as_s3_does(
            self, settings):
        """CopyObject with If-None-Match: * onto a key that holds an object is 412 and
        writes no version (moto alone wrote a second one), as PutObject's is."""
        from botocore.exceptions import ClientError

        s3, bucket = boto3.client("s3"), settings.bucket
        s3.put_object(Bucket=bucket, Key="src", Body=b"%PDF-1.7")
        s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"},
                       IfNoneMatch="*")
        for write in (lambda: s3.copy_object(Bucket=bucket, Key="dst", IfNoneMatch="*",
                                             CopySource={"Bucket": bucket, "Key": "src"}),
                      lambda: s3.put_object(Bucket=bucket, Key="dst", Body=b"x",
                                            IfNoneMatch="*")):
            with pytest.raises(ClientError, match="PreconditionFailed"):
                write()
        versions = s3.list_object_versions(Bucket=bucket, Prefix="dst").get("Versions", [])
        assert len(versions) == 1
