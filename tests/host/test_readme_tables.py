"""The README's result tables are generated from results/*.json
(bench/tables.py); a table edited by hand, or a results file rerun without
regenerating the README, fails here."""
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
TABLES = TOP / "bench/tables.py"


def test_readme_tables_match_results():
    run = subprocess.run([sys.executable, str(TABLES), "--check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr + run.stdout


def test_every_generator_has_its_table_in_the_readme():
    readme = (TOP / "README.md").read_text()
    for name in ("containers", "vm", "hit", "clone-items", "demo"):
        assert f"<!-- table:{name} -->" in readme and f"<!-- /table:{name} -->" in readme, name


def test_a_stale_table_is_caught(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- table:hit -->\n| old | numbers |\n<!-- /table:hit -->\n")
    check = [sys.executable, str(TABLES), "--check", "--readme", str(readme)]
    assert subprocess.run(check, capture_output=True).returncode == 1
    subprocess.run([sys.executable, str(TABLES), "--write", "--readme", str(readme)], check=True)
    assert subprocess.run(check, capture_output=True).returncode == 0
    assert "| 4 KiB random reads |" in readme.read_text()
