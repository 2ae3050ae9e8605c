"""deploy/imposer-host.yaml: one licensed host, linted, and joined to the shared stack and the bootstrap.

The host template imports the shared stack's exports, runs deploy/bootstrap-host.sh with
the variables its head requires, and holds the instance to what a node-locked licence and
a host reading untrusted PDFs need (IMDSv2, encrypted root, a kept network interface, a
role of its own). A change on one side alone fails here; tests/deploy/test_bootstrap.py
runs the bootstrap under the policies.
"""

from __future__ import annotations

import json
import re

import pytest
from cfnlint.api import lint_file
from click.testing import CliRunner
from parliament import analyze_policy_string

from tests.deploy.template import HOST_TEMPLATE, TEMPLATE, Stack, load

BOOTSTRAP = TEMPLATE.parent / "bootstrap-host.sh"
PARAMETERS = {"HostName": "press-1", "SubnetId": "subnet-0a1b2c3d",
              "SecurityGroupIds": "sg-0a1b2c3d",
              "WheelKey": "deploy/imposer-0.2.0-py3-none-any.whl",
              "InstallerKey": "deploy/pdfToolboxCLI-Linux64.tar.gz",
              "LicenceParameter": "/imposer/licence/press-1",
              "ActivateCommand": "read -r key; exec /opt/callas/pdfToolbox --activate \"$key\""}


def host(**changes) -> Stack:
    return Stack({**PARAMETERS, **changes}, template=load(HOST_TEMPLATE), name="imposer-press-1",
                 imports=Stack())


def user_data(stack: Stack) -> str:
    return stack.resolve(stack.template["Resources"]["Host"]["Properties"]["UserData"])[
        "Fn::Base64"]


class TestLint:
    def test_cfn_lint_finds_nothing(self):
        assert [str(m) for m in lint_file(HOST_TEMPLATE)] == []

    @pytest.mark.filterwarnings("ignore::DeprecationWarning")  # cfripper on pydantic 2
    def test_cfripper_finds_no_security_issue(self):
        from cfripper.cli import cli

        for resolve in ("--no-resolve", "--resolve"):
            outcome = CliRunner().invoke(cli, [str(HOST_TEMPLATE), "--format", "json", resolve])
            assert json.loads(outcome.output.splitlines()[-1]) == {
                "exceptions": [], "failures": []}, outcome.output

    @pytest.mark.parametrize("policy", ["BootstrapPolicy", "LicenceKeyDecryptPolicy"])
    def test_parliament_finds_nothing_in_the_policies(self, policy):
        made = host(LicenceKmsKeyArn="arn:aws:kms:us-east-1:123456789012:key/abcd-1234")
        document = json.dumps({"Version": "2012-10-17", "Statement": made.statements(policy)})
        assert [(f.issue, f.detail) for f in analyze_policy_string(document).findings] == []


class TestTheHost:
    def test_imdsv2_only_and_an_encrypted_root(self):
        data = host().properties("Launch")["LaunchTemplateData"]
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
        (root,) = data["BlockDeviceMappings"]
        assert root["Ebs"]["Encrypted"] is True

    def test_the_licence_sees_one_interface_that_outlives_the_instance(self):
        """A new interface is kept (Retain) when none is given; a given one is used as is."""
        made = host()
        assert made.template["Resources"]["Interface"]["DeletionPolicy"] == "Retain"
        assert made.template["Resources"]["Interface"]["UpdateReplacePolicy"] == "Retain"
        nics = made.resolve(made.template["Resources"]["Host"]["Properties"]["NetworkInterfaces"])
        assert nics == [{"DeviceIndex": "0", "NetworkInterfaceId": "imposer-press-1-Interface"}]
        kept = host(NetworkInterfaceId="eni-0123456789abcdef0")
        assert "Interface" not in kept.resources
        assert kept.resolve(kept.template["Resources"]["Host"]["Properties"][
            "NetworkInterfaces"])[0]["NetworkInterfaceId"] == "eni-0123456789abcdef0"

    def test_the_stack_waits_for_the_bootstraps_signal(self):
        assert host().template["Resources"]["Host"]["CreationPolicy"]["ResourceSignal"][
            "Count"] == 1
        text = user_data(host())
        assert "trap 'signal 1' ERR" in text and text.rstrip().endswith("signal 0")


class TestJoined:
    def test_every_import_is_a_shared_stack_export(self):
        """ImportValue names exist among the shared stack's exports (resolving would raise)."""
        names = re.findall(r"\$\{SharedStack\}-(\w+)", HOST_TEMPLATE.read_text())
        shared = Stack()
        assert names and all(shared.exported(f"imposer-{n}") is not None for n in names)

    def test_the_user_data_sets_every_variable_the_bootstrap_requires(self):
        required = re.search(r"for name in ([A-Z_ \\\n]+); do", BOOTSTRAP.read_text()).group(1)
        required = set(required.replace("\\", " ").split())
        body = user_data(host()).split("<<'BOOTSTRAP_ENV'\n", 1)[1].split("\nBOOTSTRAP_ENV")[0]
        written = {line.split("=", 1)[0] for line in body.splitlines()}
        assert required and required <= written

    def test_the_user_data_writes_the_shared_env_file(self):
        text = user_data(host())
        env = text.split("<<'STACK_ENV'\n", 1)[1].split("\nSTACK_ENV", 1)[0]
        assert env == Stack().output("EnvFile")

    def test_the_hostname_is_the_host_id_and_the_log_stream(self):
        """The user data names the machine HostName; the bootstrap makes IMPOSER_HOST_ID
        `uname -n`; the agent names the stream {hostname}."""
        assert "hostnamectl set-hostname 'press-1'" in user_data(host())
        assert 'echo "IMPOSER_HOST_ID=$(uname -n)"' in BOOTSTRAP.read_text()
        agent = json.loads((TEMPLATE.parent / "cloudwatch-agent.json").read_text())
        (shipped,) = agent["logs"]["logs_collected"]["files"]["collect_list"]
        assert shipped["log_stream_name"] == "{hostname}"

    def test_the_role_is_the_hosts_own(self):
        """WorkerPolicy and LogShippingPolicy from the shared stack, BootstrapPolicy of its
        own; no AWS-managed policy."""
        made = host()
        role = made.properties("HostRole")
        shared = Stack()
        assert role["ManagedPolicyArns"] == [shared.output("WorkerPolicyArn"),
                                             shared.output("LogShippingPolicyArn")]
        assert made.properties("BootstrapPolicy")["Roles"] == [made.ref("HostRole")]

    def test_the_licence_grant_is_this_hosts_parameter_only(self):
        statements = {s["Sid"]: s for s in host().statements("BootstrapPolicy")}
        assert statements["LicenceKey"]["Resource"] == (
            "arn:aws:ssm:us-east-1:123456789012:parameter/imposer/licence/press-1")
        assert "LicenceKeyDecryptPolicy" not in host().resources
        (decrypt,) = host(LicenceKmsKeyArn="arn:aws:kms:us-east-1:123456789012:key/k"
                          ).statements("LicenceKeyDecryptPolicy")
        assert decrypt["Resource"] == "arn:aws:kms:us-east-1:123456789012:key/k"
        assert decrypt["Condition"] == {
            "StringEquals": {"kms:ViaService": "ssm.us-east-1.amazonaws.com"}}
