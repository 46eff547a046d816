"""What the host suite's modules share."""
import importlib.util
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]


def load_program(relpath):
    """The program at RELPATH in the checkout (scripts/fstests.py,
    tests/soak.py) as a module, to test its functions: a program run by path
    is in no package, and nothing puts its directory on sys.path."""
    path = TOP / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
