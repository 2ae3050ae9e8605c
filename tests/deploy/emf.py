"""What CloudWatch makes of log lines: the EMF specification, and metric filter patterns.

``problems`` checks one JSON log line against the published Embedded Metric
Format specification (the ``_aws`` metadata object, its ``CloudWatchMetrics``
directives, target members, the limits CloudWatch enforces) and against the
reference implementation, ``aws-embedded-metrics``: the record its
serializer writes for the same namespace, dimensions and value must be part
of the line. ``matches`` evaluates the JSON metric filter patterns the
template uses, the way CloudWatch Logs does; ``reads`` lists every metric
the template's alarms and dashboard read.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any, Iterator

import attrs
from aws_embedded_metrics import validator
from aws_embedded_metrics.logger.metrics_context import MetricsContext
from aws_embedded_metrics.serializers.log_serializer import LogSerializer
from aws_embedded_metrics.unit import Unit

#: Limits of the specification (CloudWatch rejects a record beyond them).
MAX_EVENT_BYTES = 256 * 1024
MAX_METRICS_PER_DIRECTIVE = 100
MAX_DIMENSIONS_PER_SET = 30
MAX_VALUES_PER_METRIC = 100
MAX_DIMENSION_VALUE = 1024
MAX_NAMESPACE = 255
#: Members each object of the specification may have; "MUST NOT contain any additional members".
METADATA_MEMBERS = {"Timestamp", "CloudWatchMetrics", "LogGroupName"}
DIRECTIVE_MEMBERS = {"Namespace", "Dimensions", "Metrics"}
DEFINITION_MEMBERS = {"Name", "Unit", "StorageResolution"}
UNITS = {u.value for u in Unit}


@attrs.frozen
class DataPoint:
    """One metric a line carries, as CloudWatch stores it."""

    namespace: str
    name: str
    #: Dimension name -> value, as a sorted tuple of pairs.
    dimensions: tuple[tuple[str, str], ...]
    unit: str
    value: float

    @property
    def dimension_names(self) -> frozenset[str]:
        return frozenset(k for k, _ in self.dimensions)


def is_metric_line(record: dict[str, Any]) -> bool:
    """A line that claims to be a metric: an envelope, or imposer's metric fields."""
    return "_aws" in record or "metric" in record or str(record.get("action", "")).startswith(
        "metric")


def problems(line: str) -> list[str]:
    """Every way *line* breaks the EMF specification or differs from the reference record."""
    if len(line.encode()) > MAX_EVENT_BYTES:
        return [f"event is {len(line.encode())} bytes, over {MAX_EVENT_BYTES}"]
    try:
        root = json.loads(line)
    except ValueError as exc:
        return [f"not one JSON object: {exc}"]
    if not isinstance(root, dict):
        return ["the root node is not an object"]
    meta = root.get("_aws")
    if not isinstance(meta, dict):
        return ["no _aws metadata object"]
    out = [f"_aws has member {k!r} the specification does not define"
           for k in set(meta) - METADATA_MEMBERS]
    stamp = meta.get("Timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, int) or stamp <= 0:
        out.append(f"Timestamp {stamp!r} is not epoch milliseconds")
    directives = meta.get("CloudWatchMetrics")
    if not isinstance(directives, list) or not directives:
        return out + ["CloudWatchMetrics is not a non-empty array of directives"]
    for directive in directives:
        out += _directive_problems(root, directive)
    if not out:
        out += _reference_problems(root)
    return out


def _directive_problems(root: dict, directive: Any) -> list[str]:
    if not isinstance(directive, dict):
        return ["a directive is not an object"]
    out = [f"directive has member {k!r} the specification does not define"
           for k in set(directive) - DIRECTIVE_MEMBERS]
    namespace = directive.get("Namespace")
    if not isinstance(namespace, str) or not namespace.strip() or len(namespace) > MAX_NAMESPACE:
        out.append(f"Namespace {namespace!r} is not a string of 1-{MAX_NAMESPACE} characters")
    sets = directive.get("Dimensions")
    if not isinstance(sets, list):
        out.append("Dimensions is not an array of dimension sets")
        sets = []
    for dims in sets:
        if not isinstance(dims, list) or len(dims) > MAX_DIMENSIONS_PER_SET:
            out.append(f"dimension set {dims!r} is not an array of at most "
                       f"{MAX_DIMENSIONS_PER_SET} keys")
            continue
        for key in dims:
            value = root.get(key)
            if not isinstance(value, str) or not value.strip() or len(value) > MAX_DIMENSION_VALUE:
                out.append(f"dimension {key!r} has no string value of 1-{MAX_DIMENSION_VALUE} "
                           f"characters at the root (found {value!r})")
    metrics = directive.get("Metrics")
    if not isinstance(metrics, list) or not 0 < len(metrics) <= MAX_METRICS_PER_DIRECTIVE:
        return out + [f"Metrics is not an array of 1-{MAX_METRICS_PER_DIRECTIVE} definitions"]
    for definition in metrics:
        if not isinstance(definition, dict) or not isinstance(definition.get("Name"), str):
            out.append(f"metric definition {definition!r} has no Name")
            continue
        out += [f"metric definition has member {k!r} the specification does not define"
                for k in set(definition) - DEFINITION_MEMBERS]
        name = definition["Name"]
        if definition.get("Unit", "None") not in UNITS:
            out.append(f"unit {definition.get('Unit')!r} of {name} is not a CloudWatch unit")
        if definition.get("StorageResolution", 60) not in (1, 60):
            out.append(f"StorageResolution of {name} is neither 1 nor 60")
        value = root.get(name)
        values = value if isinstance(value, list) else [value]
        if not values or len(values) > MAX_VALUES_PER_METRIC or not all(
                _finite(v) for v in values):
            out.append(f"metric {name!r} has no numeric value at the root (found {value!r})")
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def _reference_problems(root: dict) -> list[str]:
    """Serialize the same data points with aws-embedded-metrics; its record must be in *root*."""
    out = []
    stamp = datetime.datetime.fromtimestamp(root["_aws"]["Timestamp"] / 1000,
                                            datetime.timezone.utc)
    for directive in root["_aws"]["CloudWatchMetrics"]:
        try:
            context = MetricsContext(directive["Namespace"])
            validator.validate_namespace(directive["Namespace"])
            context.set_timestamp(stamp)
            context.set_dimensions([{k: root[k] for k in dims}
                                    for dims in directive["Dimensions"]], use_default=False)
            for definition in directive["Metrics"]:
                context.put_metric(definition["Name"], root[definition["Name"]],
                                   definition.get("Unit", "None"))
            reference, = LogSerializer.serialize(context)
        except Exception as exc:  # the reference refuses it: that is the finding
            out.append(f"aws-embedded-metrics refuses it: {type(exc).__name__}: {exc}")
            continue
        expected = json.loads(reference)
        want_directive, = expected.pop("_aws")["CloudWatchMetrics"]
        if want_directive != directive:
            out.append(f"directive {directive} is not the reference's {want_directive}")
        out += [f"root member {k!r} is {root.get(k)!r}, the reference writes {v!r}"
                for k, v in expected.items() if root.get(k) != v]
    return out


def data_points(root: dict) -> Iterator[DataPoint]:
    """The data points CloudWatch extracts from one valid EMF record."""
    for directive in root["_aws"]["CloudWatchMetrics"]:
        for dims in directive["Dimensions"]:
            for definition in directive["Metrics"]:
                value = root[definition["Name"]]
                for v in value if isinstance(value, list) else [value]:
                    yield DataPoint(namespace=directive["Namespace"], name=definition["Name"],
                                    dimensions=tuple(sorted((k, root[k]) for k in dims)),
                                    unit=definition.get("Unit", "None"), value=v)


# -- metric filter patterns ---------------------------------------------------------------
_TERM = re.compile(r'^\$\.([\w.]+)\s*(=|!=|>=|<=|>|<)\s*("(?:[^"]*)"|[-\d.]+)$')


def matches(pattern: str, record: dict[str, Any]) -> bool:
    """Whether the JSON filter *pattern* (``{ ($.a = "x") && ($.b > 1) }``) selects *record*.

    The subset the template uses: conjunctions and disjunctions of comparisons
    of a selector with a string or a number; anything else is an error here,
    so a new pattern form cannot pass unevaluated.
    """
    body = pattern.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"not a JSON filter pattern: {pattern!r}")
    return _expression(body[1:-1].strip(), record)


def _expression(text: str, record: dict) -> bool:
    for operator, combine in (("||", any), ("&&", all)):
        parts = _split(text, operator)
        if len(parts) > 1:
            return combine(_expression(p, record) for p in parts)
    if text.startswith("(") and text.endswith(")"):
        return _expression(text[1:-1].strip(), record)
    term = _TERM.match(text)
    if not term:
        raise ValueError(f"filter term {text!r} is not a comparison this evaluator knows")
    selector, operator, literal = term.groups()
    value: Any = record
    for part in selector.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if literal.startswith('"'):
        want = literal[1:-1]
        if operator not in ("=", "!="):
            raise ValueError(f"a string compares only with = or != ({text!r})")
        hit = isinstance(value, str) and (
            re.fullmatch(".*".join(map(re.escape, want.split("*"))), value) is not None)
        return hit if operator == "=" else not hit
    if not _finite(value):
        return False
    number = float(literal)
    return {"=": value == number, "!=": value != number, ">": value > number,
            "<": value < number, ">=": value >= number, "<=": value <= number}[operator]


def _split(text: str, operator: str) -> list[str]:
    """Split *text* on *operator* outside parentheses and quotes."""
    parts, depth, quoted, start, i = [], 0, False, 0, 0
    while i < len(text):
        char = text[i]
        if char == '"':
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(operator, i):
            parts.append(text[start:i].strip())
            start = i = i + len(operator)
            continue
        i += 1
    return parts + [text[start:].strip()]


# -- what the template reads ---------------------------------------------------------------
@attrs.frozen
class Read:
    """One metric an alarm or a dashboard widget reads."""

    #: The alarm's or widget's name, for messages.
    where: str
    namespace: str
    name: str
    dimensions: frozenset[str]
    #: The unit an alarm asks for (None: any).
    unit: str | None = None
    #: Dimension values a WHERE clause or a plain metric row asks for.
    values: tuple[tuple[str, str], ...] = ()


_SEARCH = re.compile(r"SEARCH\('\{([^,}]+),?([^}]*)\} MetricName=\"(\w+)\"")
_SELECT = re.compile(r"SELECT \w+\((\w+)\) FROM SCHEMA\(\"([^\"]+)\",? ?([^)]*)\)"
                     r"(?: WHERE ((?:\w+ = '[^']*'(?: AND )?)+))?")


def expression_reads(where: str, text: str) -> list[Read]:
    """The metrics a SEARCH or Metrics Insights expression reads."""
    out = [Read(where, ns, name, frozenset(d.strip() for d in dims.split(",") if d.strip()))
           for ns, dims, name in _SEARCH.findall(text)]
    for name, ns, dims, condition in _SELECT.findall(text):
        values = tuple(sorted(re.findall(r"(\w+) = '([^']*)'", condition or "")))
        out.append(Read(where, ns, name,
                        frozenset(d.strip() for d in dims.split(",") if d.strip()),
                        values=values))
    if "SEARCH(" in text and not _SEARCH.search(text) or \
            "SELECT" in text and not _SELECT.search(text):
        raise ValueError(f"{where}: expression {text!r} is in a form this reader does not know")
    return out


def reads(stack) -> list[Read]:
    """Every metric the stack's alarms and dashboard widgets read."""
    out = []
    for logical, alarm in stack.of_type("AWS::CloudWatch::Alarm").items():
        if "MetricName" in alarm:
            out.append(_stat_read(logical, alarm, alarm.get("Unit")))
        for query in alarm.get("Metrics", []):
            if "MetricStat" in query:
                out.append(_stat_read(logical, query["MetricStat"]["Metric"],
                                      query["MetricStat"].get("Unit")))
            elif "Expression" in query:
                out += expression_reads(logical, query["Expression"])
    body = json.loads(stack.properties("Dashboard")["DashboardBody"])
    for widget in body["widgets"]:
        title = widget["properties"].get("title", "")
        for row in widget["properties"].get("metrics", []):
            options = row[-1] if isinstance(row[-1], dict) else {}
            if "expression" in options:
                out += expression_reads(title, options["expression"])
                continue
            plain = row[:-1] if options else row
            pairs = tuple(zip(plain[2::2], plain[3::2]))
            out.append(Read(title, plain[0], plain[1], frozenset(k for k, _ in pairs),
                            values=tuple(sorted(pairs))))
    return out


def _stat_read(where: str, metric: dict, unit: str | None) -> Read:
    pairs = tuple((d["Name"], d["Value"]) for d in metric.get("Dimensions", []))
    return Read(where, metric["Namespace"], metric["MetricName"],
                frozenset(k for k, _ in pairs), unit, tuple(sorted(pairs)))
