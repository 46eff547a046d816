"""The FICLONERANGE2 user ABI, read from its one userspace definition,
tools/pcshare/ficlonerange2.h (tests/host/test_abi.py checks that header
against the uapi header the kernel series adds), so Python never carries a
hand-computed ioctl number or field list of its own."""
import re
from pathlib import Path

HEADER = Path(__file__).resolve().parents[1] / "tools/pcshare/ficlonerange2.h"

_IOC_DIR = {"_IO": 0, "_IOW": 1, "_IOR": 2, "_IOWR": 3}


def _strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def struct_fields(text=None, name="file_clone_range2"):
    """[(field, count, signed)] of a struct of 64-bit members; count > 1 for
    arrays."""
    text = _strip_comments(text if text is not None else HEADER.read_text())
    body = re.search(r"struct\s+%s\s*\{(.*?)\};" % name, text, re.S)
    if not body:
        raise ValueError(f"struct {name} not found")
    fields = []
    for decl in filter(None, (d.strip() for d in body.group(1).split(";"))):
        m = re.fullmatch(r"__([su])64\s+(\w+)(?:\[(\d+)\])?", decl)
        if not m:
            raise ValueError(f"struct {name}: unexpected member {decl!r}")
        fields.append((m.group(2), int(m.group(3) or 1), m.group(1) == "s"))
    return fields


def field_offsets(fields):
    """{field: index of its first 64-bit word} for struct_fields()' output."""
    offsets, at = {}, 0
    for name, count, _ in fields:
        offsets[name] = at
        at += count
    return offsets


def defines(text=None):
    """{name: value text} of the header's #defines."""
    text = _strip_comments(text if text is not None else HEADER.read_text())
    return dict(re.findall(r"^#define\s+(\w+)[ \t]+(.+?)\s*$", text, re.M))


def ioctl_number(text=None, name="FICLONERANGE2"):
    """The request number of ioctl `name`, computed as asm-generic/ioctl.h does."""
    text = text if text is not None else HEADER.read_text()
    m = re.fullmatch(r"(_IO\w*)\((0x[0-9a-fA-F]+|\d+|'.'),\s*(\d+),\s*struct\s+(\w+)\)",
                     defines(text)[name])
    if not m:
        raise ValueError(f"{name}: cannot parse {defines(text)[name]!r}")
    kind, typ, nr, struct = m.groups()
    typ = ord(typ[1]) if typ.startswith("'") else int(typ, 0)
    size = 8 * sum(n for _, n, _ in struct_fields(text, struct))
    return (_IOC_DIR[kind] << 30) | (size << 16) | (typ << 8) | int(nr)
