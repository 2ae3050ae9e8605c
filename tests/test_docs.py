"""README and the pages under docs/: every link lands on a page and a section that exist.

README is the front door; each page of ``docs/`` is reached from it. A link is
checked the way docutils reads it (the parser GitHub and PyPI render with): the
file it names must exist, and the ``#anchor`` must be the id of a section (or an
explicit target) of that file. A page that does not parse cleanly (a link to a
section title that is not there, a broken table) fails too.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from docutils import nodes
from docutils.core import publish_doctree

ROOT = Path(__file__).resolve().parents[1]
#: A link that leaves the repository.
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def pages(root: Path) -> list[Path]:
    """README and every page under docs/."""
    return [root / "README.rst", *sorted((root / "docs").glob("*.rst"))]


def parse(path: Path) -> tuple[nodes.document, str]:
    """The page's doctree and what docutils complained of while reading it."""
    complaints = io.StringIO()
    tree = publish_doctree(path.read_text(), source_path=str(path), settings_overrides={
        "report_level": 2, "halt_level": 5, "warning_stream": complaints,
        "syntax_highlight": "none", "file_insertion_enabled": False, "raw_enabled": False})
    return tree, complaints.getvalue()


def anchors(tree: nodes.document) -> set[str]:
    """Every id a link may point at: sections and explicit targets."""
    return {i for node in tree.findall(nodes.Element) for i in node.get("ids", ())}


def local_links(tree: nodes.document) -> list[str]:
    """Every link of the page that stays in the repository."""
    return [ref["refuri"] for ref in tree.findall(nodes.reference)
            if "refuri" in ref and not EXTERNAL.match(ref["refuri"])]


def problems(root: Path) -> list[str]:
    """What is wrong with the links of README and docs/, one line each."""
    root = root.resolve()
    found, trees, from_readme = [], {}, set()
    for page in pages(root):
        trees[page], complaints = parse(page)
        found += [f"{page.relative_to(root)}: {line}" for line in complaints.splitlines()
                  if "(WARNING/" in line or "(ERROR/" in line or "(SEVERE/" in line]
    for page, tree in list(trees.items()):
        for link in local_links(tree):
            name, _, anchor = link.partition("#")
            target = (page.parent / name).resolve() if name else page
            where = f"{page.relative_to(root)}: {link}"
            if not target.is_file():
                found.append(f"{where}: no such file")
                continue
            if page.name == "README.rst" and page.parent == root:
                from_readme.add(target)
            if anchor and target.suffix == ".rst":
                if target not in trees:
                    trees[target] = parse(target)[0]
                if anchor not in anchors(trees[target]):
                    found.append(f"{where}: {target.name} has no section #{anchor}")
    found += [f"{page.relative_to(root)}: not linked from README"
              for page in pages(root)[1:] if page.resolve() not in from_readme]
    return found


def try_it_commands(root: Path) -> tuple[str, str]:
    """README's command that runs the tests, past its package check, and the one .ci/run runs."""
    readme = [line.strip() for line in (root / "README.rst").read_text().splitlines()
              if "-m pytest" in line]
    ci = [line.strip() for line in (root / ".ci" / "run").read_text().splitlines()
          if "-m pytest" in line and not line.lstrip().startswith("#")]
    assert len(readme) == 1 and len(ci) == 1, (readme, ci)
    return readme[0].split(") && ", 1)[-1], ci[0]


class TestTryIt:
    def test_ci_runs_readmes_test_command(self):
        """.ci/run runs README's test command word for word (after the package check it does
        its own way)."""
        readme, ci = try_it_commands(ROOT)
        assert readme.startswith("python3 -m venv .venv && ") and ci == readme


class TestDocsLinks:
    def test_every_link_lands_and_every_page_is_reachable(self):
        """Each link of README and docs/ names a file and section that exist; README links
        every docs page."""
        assert problems(ROOT) == []

    def test_docs_has_pages(self):
        """The split is in place: docs/ holds the pages README leads to."""
        assert len(pages(ROOT)) > 5

    def test_the_check_can_fail(self, tmp_path):
        """A missing file, a missing section, a broken in-page link and an unlinked page are
        each reported."""
        (tmp_path / "docs").mkdir()
        (tmp_path / "README.rst").write_text(
            "Title\n=====\n\nSee `a <docs/a.rst#there>`__, `b <docs/b.rst#nowhere>`__,\n"
            "`gone <docs/gone.rst>`__ and `Missing title`_.\n")
        (tmp_path / "docs" / "a.rst").write_text("There\n=====\n\nBack to `x <../README.rst>`__.\n")
        (tmp_path / "docs" / "b.rst").write_text("Here\n====\n\ntext\n")
        (tmp_path / "docs" / "c.rst").write_text("Alone\n=====\n\ntext\n")
        found = "\n".join(problems(tmp_path))
        assert "docs/b.rst#nowhere: b.rst has no section #nowhere" in found
        assert "docs/gone.rst: no such file" in found
        assert "Unknown target name" in found and "missing title" in found
        assert "docs/c.rst: not linked from README" in found
        assert "docs/a.rst" not in found.replace("docs/a.rst#there", "")
