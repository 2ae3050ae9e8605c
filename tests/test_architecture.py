"""The package layout is the architecture: imports flow only the allowed way, never round a loop."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import imposer

ROOT = Path(imposer.__file__).parent


def module_name(path: Path) -> str:
    return ("imposer." + ".".join(path.relative_to(ROOT).with_suffix("").parts)).removesuffix(
        ".__init__")


def area(module: str) -> str:
    """Say which entry of the rules a dotted imposer module belongs to."""
    first = module.split(".")[1] if "." in module else "__init__"
    if first in imposer.CORE:
        return "core"
    return "cli" if first in ("__init__", "__main__") else first


def is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split(".")[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports_of(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """Every imposer module *path* imports, at any depth (lazy imports count too); or
    *source* does, read as if it were *path*'s."""
    package = module_name(path) if path.name == "__init__.py" else \
        module_name(path).rpartition(".")[0]
    found = []
    text = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("imposer")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != "imposer":
                continue
            for alias in node.names:  # `from imposer.aws import s3` imports a module
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if is_module(sub) else base))
    return found


def allowed(source: str, target: str) -> bool:
    src, dst = area(source), area(target)
    rules = imposer.ALLOWED_IMPORTS[src]
    if src == dst or "*" in rules or dst in rules:
        return True
    return dst == "aws" and ".".join(target.split(".")[1:3]) in rules


def violations(paths) -> list[str]:
    bad = []
    for path in paths:
        module = module_name(path)
        bad += [f"{path.relative_to(ROOT.parent)}:{line}: {module} -> {target}"
                for line, target in imports_of(path)
                if target != "imposer" and not allowed(module, target)]
    return bad


def import_graph(paths) -> dict[str, set[str]]:
    """Module -> the imposer modules it imports anywhere in its code (in a function too)."""
    return {module_name(path): {t for _, t in imports_of(path) if t != "imposer"}
            for path in paths}


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other round a loop, each sorted.

    A module is in a loop when it reaches itself; its group is every module
    it reaches that reaches it back. A few hundred modules: plain searches do.
    """
    reach = {}
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo += graph.get(module, ())
        reach[start] = seen
    groups = {tuple(sorted(m for m in reach[start] if start in reach.get(m, ())))
              for start in graph if start in reach[start]}
    return [list(group) for group in sorted(groups)]


class TestImportDirections:
    def test_every_package_has_a_rule(self):
        """Each subpackage of imposer is named in ALLOWED_IMPORTS, so a new one needs a rule."""
        packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
        assert packages <= set(imposer.ALLOWED_IMPORTS), packages - set(imposer.ALLOWED_IMPORTS)

    def test_imports_follow_the_rules(self):
        """No module imports a package its own package may not depend on."""
        assert violations(sorted(ROOT.rglob("*.py"))) == []

    @pytest.mark.parametrize("line", [
        "from imposer.aws import sqs", "import imposer.aws.dynamodb",
        "from imposer.state.leases import LeaseStore", "from imposer.worker.dispatch import pool",
    ])
    def test_a_pool_child_reaching_sqs_or_state_fails(self, tmp_path, line):
        """The check catches a child module that imports SQS, DynamoDB, state or the parent."""
        fake = ROOT / "child" / "_probe_for_test.py"
        fake.write_text(line + "\n")
        try:
            assert violations([fake]), f"{line!r} was not caught"
        finally:
            fake.unlink()

    def test_a_child_may_use_s3(self):
        """The storage adapter is the child's one door to AWS."""
        fake = ROOT / "child" / "_probe_for_test.py"
        fake.write_text("from imposer.aws import s3\nfrom imposer.aws.session import CALLS\n")
        try:
            assert violations([fake]) == []
        finally:
            fake.unlink()

    def test_the_client_shares_only_models(self):
        """The tenant-side client imports nothing of the service but models."""
        fake = ROOT / "client" / "_probe_for_test.py"
        fake.write_text("from imposer.errors import ConfigError\n")
        try:
            assert violations([fake]) == ["imposer/client/_probe_for_test.py:1: "
                                          "imposer.client._probe_for_test -> imposer.errors"]
        finally:
            fake.unlink()


class TestNoImportLoops:
    def test_no_module_imports_round_a_loop(self):
        """No imposer module reaches itself through imports, a function's import included."""
        assert loops(import_graph(sorted(ROOT.rglob("*.py")))) == []

    def test_a_function_level_import_that_closes_a_loop_fails(self):
        """An import inside a function that closes a loop is caught: the pool child's task
        importing back from the loop that runs it (the loop hidden that way once)."""
        graph = import_graph(sorted(ROOT.rglob("*.py")))
        task = ROOT / "child" / "task.py"
        probe = "def impose():\n    from imposer.child.main import child_main\n"
        graph[module_name(task)] |= {t for _, t in imports_of(task, probe)}
        assert ["imposer.child.main", "imposer.child.task"] in loops(graph)

    def test_a_lazy_import_that_closes_no_loop_is_allowed(self):
        """A function-level import for start-up cost or an optional dependency is fine while
        nothing it reaches imports back."""
        graph = import_graph(sorted(ROOT.rglob("*.py")))
        task = ROOT / "child" / "task.py"
        probe = "def impose():\n    from imposer.engine.pdftoolbox import run_tool\n"
        graph[module_name(task)] |= {t for _, t in imports_of(task, probe)}
        assert loops(graph) == []


#: The longest a module of imposer may grow before it is split along a seam of its own.
MAX_LINES = 300


def too_long(paths, limit: int = MAX_LINES) -> list[str]:
    return [f"{p.relative_to(ROOT.parent)}: {n} lines" for p in paths
            if (n := len(p.read_text().splitlines())) > limit]


class TestModuleSize:
    def test_no_module_is_over_the_limit(self):
        """Every module of imposer fits in MAX_LINES lines: one owner, readable in a sitting."""
        assert too_long(sorted(ROOT.rglob("*.py"))) == []

    def test_a_module_over_the_limit_is_named(self):
        """The check names a module one line over, and passes one at the limit."""
        longest = max(sorted(ROOT.rglob("*.py")), key=lambda p: len(p.read_text().splitlines()))
        lines = len(longest.read_text().splitlines())
        assert too_long([longest], lines - 1) == [
            f"{longest.relative_to(ROOT.parent)}: {lines} lines"]
        assert too_long([longest], lines) == []


#: A constructor takes what it uses, typed, and no more than this many arguments.
MAX_ARGUMENTS = 8
#: The constructors wider than that today, each at its present width: the debt issue 37
#: names. None may grow; a new one may not join them; one that narrows to the limit
#: must be taken off (``test_the_wide_list_only_names_wide_constructors``).
WIDE = {"Supervisor": 10, "Dispatcher": 12, "Completer": 9, "Launcher": 9,
        "Utilisation": 9, "LiveView": 10, "ParkedStarts": 9,
        "Writer": 9}


def widths(paths) -> dict[str, int]:
    """Each class of *paths* with an ``__init__`` -> how many arguments it takes."""
    out = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                for f in node.body:
                    if isinstance(f, ast.FunctionDef) and f.name == "__init__":
                        out[node.name] = len(f.args.args) - 1 + len(f.args.kwonlyargs)
    return out


def too_wide(found: dict[str, int], wide=WIDE) -> list[str]:
    return [f"{name}: {n} arguments" for name, n in sorted(found.items())
            if n > wide.get(name, MAX_ARGUMENTS)]


class TestConstructorWidth:
    def test_no_constructor_is_wider_than_allowed(self):
        """No constructor of imposer takes more than MAX_ARGUMENTS arguments, but those
        WIDE names, and none of those more than it does today."""
        assert too_wide(widths(sorted(ROOT.rglob("*.py")))) == []

    def test_a_wider_constructor_is_named(self):
        """The check names a constructor one argument over its allowance."""
        assert too_wide({"Supervisor": 23, "Fresh": 9, "Narrow": 8}) == [
            "Fresh: 9 arguments", "Supervisor: 23 arguments"]

    def test_the_wide_list_only_names_wide_constructors(self):
        """Each name in WIDE is a constructor of imposer at exactly its recorded width, so
        the list shrinks as the debt is paid (the Settler left it at 8)."""
        found = widths(sorted(ROOT.rglob("*.py")))
        assert {name: found.get(name) for name in WIDE} == WIDE
        assert found["Settler"] <= MAX_ARGUMENTS


def reach_throughs(paths) -> list[str]:
    """Every ``self.part.collaborator.thing`` in *paths*: a part that uses another part's
    collaborator (``self.settings.x.y`` aside: settings are values, not a part)."""
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            inner = getattr(node, "value", None)
            if isinstance(node, ast.Attribute) and isinstance(inner, ast.Attribute) and \
                    isinstance(inner.value, ast.Attribute) and \
                    isinstance(inner.value.value, ast.Name) and inner.value.value.id == "self" \
                    and inner.value.attr != "settings":
                out.append(f"{path.name}:{node.lineno}: self.{inner.value.attr}."
                           f"{inner.attr}.{node.attr}")
    return out


class TestNoReachingThrough:
    def test_no_part_of_the_worker_uses_another_parts_collaborators(self):
        """The parent's parts ask each other, never each other's collaborators (the
        settler once read the dispatcher's launcher, the intake its share rule)."""
        assert reach_throughs(sorted((ROOT / "worker").rglob("*.py"))) == []

    def test_a_reach_through_is_named(self, tmp_path):
        """The check names ``self.dispatch.launcher.started``, not ``self.settings.a.b``
        or ``self.clock.time()``."""
        bad = tmp_path / "bad.py"
        bad.write_text("class P:\n    def f(self):\n        self.clock.time()\n"
                       "        self.settings.a.b\n        return self.dispatch.launcher.started\n")
        assert reach_throughs([bad]) == ["bad.py:5: self.dispatch.launcher.started"]


def built_where(paths, name: str = "from_settings") -> list[str]:
    """Each module of *paths* that builds a LeaseTiming (``LeaseTiming.<name>`` or
    ``LeaseTiming(...)``), by its path under imposer/."""
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            built = isinstance(node, ast.Attribute) and node.attr == name and \
                getattr(node.value, "id", None) == "LeaseTiming" or \
                isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LeaseTiming"
            if built:
                out.append(path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT)
                           else path.name)
                break
    return out


class TestOneTiming:
    def test_the_lease_timing_is_built_only_by_the_composition_roots(self):
        """Every share of the lease TTL the parent acts on comes from one LeaseTiming made
        by ``wiring.build`` and handed to each part (test_wiring checks it is one object);
        no part builds its own from Settings. The operator commands are their own root."""
        assert built_where(sorted(ROOT.rglob("*.py"))) == ["cli/worker.py",
                                                           "worker/wiring.py"]

    def test_a_part_that_builds_one_is_named(self, tmp_path):
        bad = tmp_path / "bad.py"
        bad.write_text("def f(s):\n    return LeaseTiming.from_settings(s).ttl\n")
        direct = tmp_path / "direct.py"
        direct.write_text("def f(s):\n    return LeaseTiming(ttl=s.ttl, park=s.park)\n")
        fine = tmp_path / "fine.py"
        fine.write_text("def f(timing):\n    return timing.ttl\n")
        assert built_where([bad, direct, fine]) == ["bad.py", "direct.py"]


def reserved_log_fields(paths) -> list[tuple[str, int, str]]:
    """Every ``extra(...)`` call that names a LogRecord attribute, as (file, line, field):
    logging raises KeyError ("Attempt to overwrite ...") at that call, so the line is lost
    and its caller fails."""
    import logging

    reserved = set(logging.LogRecord("n", 0, "p", 0, "m", (), None).__dict__)
    reserved |= {"message", "asctime"}
    bad = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "extra":
                bad += [(path.name, node.lineno, k.arg) for k in node.keywords
                        if k.arg in reserved]
    return bad


class TestLogFields:
    def test_no_log_call_names_a_record_attribute(self):
        """No structured log line of imposer names a field logging reserves (``thread``,
        ``name``, ``message`` ...): such a line raises instead of being written."""
        assert reserved_log_fields(sorted(ROOT.rglob("*.py"))) == []

    def test_a_reserved_field_is_caught(self, tmp_path):
        """The check names a call passing ``thread=`` (as check_health once did) and lets
        ``thread_name=`` pass."""
        probe = tmp_path / "probe.py"
        probe.write_text('extra("thread_died", thread="sweep")\n'
                         'extra("thread_died", thread_name="sweep")\n')
        assert reserved_log_fields([probe]) == [("probe.py", 1, "thread")]
