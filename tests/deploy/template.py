"""deploy/imposer.yaml as data: every intrinsic function evaluated, as CloudFormation would.

Tests compare the evaluated template with what the code declares (table
specs, settings) and creates (`imposer init` on the local stack), and load
its policies into the IAM-enforcing stack, so nothing there is copied by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cfnlint.decode import cfn_yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "imposer.yaml"
#: One licensed host's stack; it imports the shared stack's exports.
HOST_TEMPLATE = TEMPLATE.parent / "imposer-host.yaml"
#: moto's account; the ARNs it makes use it.
ACCOUNT = "123456789012"


def load(path: Path = TEMPLATE) -> dict[str, Any]:
    """Read the template with its short-form tags as plain ``Fn::*`` dicts."""
    return json.loads(json.dumps(cfn_yaml.load(str(path))))


class Stack:
    """The template evaluated for some parameter values in one region and account."""

    def __init__(self, parameters: dict[str, Any] | None = None, *, region: str = "us-east-1",
                 account: str = ACCOUNT, name: str = "imposer",
                 template: dict[str, Any] | None = None,
                 imports: "Stack | None" = None) -> None:
        self.template = template or load()
        self.region, self.account, self.name = region, account, name
        #: The stack whose exports ``Fn::ImportValue`` reads (the shared one, for a host's).
        self.imports = imports
        self.parameters = {key: str(spec.get("Default", ""))
                           for key, spec in self.template["Parameters"].items()}
        for key, value in (parameters or {}).items():
            if key not in self.parameters:
                raise KeyError(f"the template has no parameter {key}")
            self.parameters[key] = str(value)
        self.resources = {key: res for key, res in self.template["Resources"].items()
                          if self.condition(res.get("Condition"))}

    # -- what tests ask ---------------------------------------------------------------------
    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        """Resolved properties of every resource of *kind*, by logical id."""
        return {key: self.properties(key) for key, res in self.resources.items()
                if res["Type"] == kind}

    def properties(self, logical: str) -> dict[str, Any]:
        return self.resolve(self.resources[logical].get("Properties", {}))

    def statements(self, logical: str) -> list[dict[str, Any]]:
        """The resolved statements of a managed policy."""
        return self.properties(logical)["PolicyDocument"]["Statement"]

    def output(self, key: str) -> Any:
        return self.resolve(self.template["Outputs"][key]["Value"])

    def exported(self, name: str) -> Any:
        """The value of the output exported as *name*, as ``Fn::ImportValue`` reads it."""
        for spec in self.template["Outputs"].values():
            if "Export" in spec and self.resolve(spec["Export"]["Name"]) == name:
                return self.resolve(spec["Value"])
        raise KeyError(f"stack {self.name} exports no {name}")

    # -- CloudFormation's evaluation ---------------------------------------------------------
    def condition(self, name: str | None) -> bool:
        if name is None:
            return True
        return bool(self.resolve(self.template["Conditions"][name]))

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [v for v in (self.resolve(v) for v in value) if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            function = _FUNCTIONS.get(key)
            if function:
                return function(self, arg)
        return {k: v for k, v in ((k, self.resolve(v)) for k, v in value.items())
                if v is not NO_VALUE}

    def ref(self, name: str) -> str:
        pseudo = {"AWS::Region": self.region, "AWS::AccountId": self.account,
                  "AWS::Partition": "aws", "AWS::StackName": self.name,
                  "AWS::URLSuffix": "amazonaws.com"}
        if name == "AWS::NoValue":
            return NO_VALUE
        if name == "AWS::StackId":
            return (f"arn:aws:cloudformation:{self.region}:{self.account}:stack/{self.name}/"
                    "0a1b2c3d-4e5f-6789-abcd-ef0123456789")
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        kind = self.resources[name]["Type"]
        props = self.resources[name].get("Properties", {})
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.amazonaws.com/{self.account}/{self.resolve(props['QueueName'])}"
        if kind in ("AWS::IAM::ManagedPolicy", "AWS::SNS::Topic"):
            return self.getatt(name, "Arn")
        for field in ("TableName", "BucketName", "LogGroupName", "DashboardName"):
            if field in props:
                return self.resolve(props[field])
        return f"{self.name}-{name}"

    def getatt(self, name: str, attribute: str) -> str:
        kind = self.resources[name]["Type"]
        props = self.resources[name].get("Properties", {})
        if kind == "AWS::SQS::Queue":
            queue = self.resolve(props["QueueName"])
            return {"QueueName": queue,
                    "Arn": f"arn:aws:sqs:{self.region}:{self.account}:{queue}"}[attribute]
        arns = {
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{self.region}:{self.account}:table/{{}}",
            "AWS::S3::Bucket": "arn:aws:s3:::{}",
            "AWS::Logs::LogGroup": f"arn:aws:logs:{self.region}:{self.account}:log-group:{{}}:*",
            "AWS::CloudWatch::Alarm": f"arn:aws:cloudwatch:{self.region}:{self.account}:alarm:{{}}",
            "AWS::CloudWatch::CompositeAlarm":
                f"arn:aws:cloudwatch:{self.region}:{self.account}:alarm:{{}}",
            "AWS::IAM::Role": f"arn:aws:iam::{self.account}:role/{{}}",
            "AWS::IAM::ManagedPolicy": f"arn:aws:iam::{self.account}:policy/{{}}",
            "AWS::SNS::Topic": f"arn:aws:sns:{self.region}:{self.account}:{{}}",
        }
        if attribute != "Arn" or kind not in arns:
            raise KeyError(f"no attribute {attribute} of {name} ({kind}) in this evaluator")
        if kind in ("AWS::IAM::ManagedPolicy", "AWS::SNS::Topic", "AWS::IAM::Role"):
            return arns[kind].format(f"{self.name}-{name}")
        return arns[kind].format(self.ref(name))

    def sub(self, arg: Any) -> str:
        text, names = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))

        def one(match: re.Match) -> str:
            inner = match.group(1)
            if inner.startswith("!"):
                return "${" + inner[1:] + "}"
            if inner in names:
                return str(names[inner])
            if "." in inner and not inner.startswith("AWS::"):
                return self.getatt(*inner.split(".", 1))
            return str(self.ref(inner))

        return re.sub(r"\$\{([^}]+)\}", one, text)


#: What ``Ref AWS::NoValue`` leaves: the list entry or property is dropped.
NO_VALUE = object()


def _import(stack: Stack, arg: Any) -> Any:
    if stack.imports is None:
        raise KeyError("Fn::ImportValue needs the exporting stack (imports=)")
    return stack.imports.exported(stack.resolve(arg))


def _if(stack: Stack, arg: list) -> Any:
    return stack.resolve(arg[1] if stack.condition(arg[0]) else arg[2])


def _getatt(stack: Stack, arg: Any) -> str:
    name, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
    return stack.getatt(name, attribute)


_FUNCTIONS = {
    "Ref": lambda s, a: s.ref(a),
    "Fn::GetAtt": _getatt,
    "Fn::Sub": lambda s, a: s.sub(a),
    "Fn::Join": lambda s, a: a[0].join(str(x) for x in s.resolve(a[1])),
    "Fn::If": _if,
    "Fn::Equals": lambda s, a: str(s.resolve(a[0])) == str(s.resolve(a[1])),
    "Fn::Not": lambda s, a: not s.resolve(a[0]),
    "Condition": lambda s, a: s.condition(a),
    "Fn::ImportValue": _import,
}
