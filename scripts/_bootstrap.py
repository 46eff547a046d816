"""For a script of scripts/ run by path without make: what the Makefile's
PYTHONPATH does, so that `import harness` finds the checkout's harness/ here
and in the processes the script starts. The one change of sys.path in the
repository (docs/development.md, "Python packages")."""
import os
import sys
from pathlib import Path

TOP = str(Path(__file__).resolve().parent.parent)
if TOP not in sys.path:
    sys.path.insert(0, TOP)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [TOP, os.environ.get("PYTHONPATH")]))
