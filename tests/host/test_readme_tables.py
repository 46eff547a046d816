"""The result tables in README.md and docs/*.md are generated from
results/*.json (bench/tables.py); a table edited by hand, or a results file
rerun without regenerating the tables, fails here. So does a relative link
in those files to a file or heading that does not exist."""
import re
import subprocess
import sys
from pathlib import Path

from bench import tables

TOP = Path(__file__).resolve().parents[2]


def tables_run(*args, **kw):
    """python3 -m bench.tables ARGS, from the checkout's root."""
    return subprocess.run([sys.executable, "-m", "bench.tables", *map(str, args)], cwd=TOP,
                          capture_output=True, text=True, **kw)


def test_tables_match_results():
    run = tables_run("--check")
    assert run.returncode == 0, run.stderr + run.stdout


def test_every_generator_has_its_table():
    text = "".join(path.read_text() for path in tables.documents())
    for name in tables.TABLES:
        assert f"<!-- table:{name} -->" in text and f"<!-- /table:{name} -->" in text, name


def test_the_readme_has_the_headline_table_and_stays_short():
    readme = (TOP / "README.md").read_text()
    assert "<!-- table:headline -->" in readme
    assert len(readme.splitlines()) < 250


def test_no_result_table_outside_a_generated_block():
    """A table with stock or pcshare columns is a result table: it must be
    generated. Other tables (knobs, timings, the uAPI checklist) may not."""
    for path in tables.documents():
        text = tables.BLOCK.sub("", path.read_text())
        for header in re.findall(r"^\|.*\|\n\|[-:| ]+\|$", text, re.M):
            first = header.splitlines()[0].lower()
            assert "stock" not in first and "pcshare" not in first, f"{path.name}: {first}"


def test_a_stale_table_is_caught_and_named(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text("text\n<!-- table:hit -->\n| old | numbers |\n<!-- /table:hit -->\n")
    stale = tables_run("--check", "--file", doc)
    assert stale.returncode == 1 and "page.md: table 'hit'" in stale.stderr, stale.stderr
    tables_run("--write", "--file", doc, check=True)
    assert tables_run("--check", "--file", doc).returncode == 0
    assert "| 4 KiB random reads |" in doc.read_text()


def test_an_unknown_table_is_named(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text("<!-- table:nosuch -->\n<!-- /table:nosuch -->\n")
    run = tables_run("--check", "--file", doc)
    assert run.returncode != 0 and "page.md: no generator for table 'nosuch'" in run.stderr


def anchors(path):
    """GitHub's heading anchors of a markdown file."""
    out = set()
    for heading in re.findall(r"^#+ (.*)$", path.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_internal_links_resolve():
    bad = []
    for path in tables.documents():
        text = re.sub(r"^(    |\t).*$", "", path.read_text(), flags=re.M)  # code blocks
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                bad.append(f"{path.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{path.name}: {target} (no such heading)")
    assert not bad, bad
