"""FICLONERANGE2's user ABI has one definition: the uapi header the kernel
series adds.  The tool's copy (tools/pcshare/ficlonerange2.h, for building
against older headers) must say the same, and Python reads its numbers from
that copy (harness.uapi), so these tests tie all three together."""
import re
import subprocess
from pathlib import Path

from harness import uapi

TOP = Path(__file__).resolve().parents[2]
PATCH = next((TOP / "kernel/patches/ficlonerange2").glob("*-fs-add-FICLONERANGE2-*.patch"))


def uapi_added_text():
    """The lines the series adds to include/uapi/linux/fs.h."""
    out, in_file = [], False
    for line in PATCH.read_text().splitlines():
        if line.startswith("diff --git "):
            in_file = line.endswith(" b/include/uapi/linux/fs.h")
        elif in_file and line.startswith("+") and not line.startswith("+++"):
            out.append(line[1:])
    assert out, f"{PATCH.name} adds nothing to include/uapi/linux/fs.h"
    return "\n".join(out) + "\n"


def normalized(value):
    return re.sub(r"\s+", " ", value).strip()


def test_struct_fields_agree():
    assert uapi.struct_fields(uapi_added_text()) == uapi.struct_fields()


def test_defines_agree():
    kernel, tool = uapi.defines(uapi_added_text()), uapi.defines()
    for name in ("FICLONERANGE2", "FICLONERANGE2_PARTIAL"):
        assert normalized(kernel[name]) == normalized(tool[name]), name


def test_generic_ioctl_space():
    # 0x15 is the FS_IOC_* space (ioctl-number.rst); 0x94 is btrfs's.
    assert (uapi.ioctl_number() >> 8) & 0xFF == 0x15


def test_python_numbers_match_the_compiler(tmp_path):
    src = tmp_path / "abi.c"
    src.write_text(
        '#include <stdio.h>\n#include <stddef.h>\n#include "ficlonerange2.h"\n'
        "int main(void)\n{\n"
        '\tprintf("%lu %zu %zu %d\\n", (unsigned long)FICLONERANGE2,\n'
        "\t       sizeof(struct file_clone_range2),\n"
        "\t       offsetof(struct file_clone_range2, reserved),\n"
        "\t       FICLONERANGE2_PARTIAL);\n\treturn 0;\n}\n")
    exe = tmp_path / "abi"
    subprocess.run(["cc", "-Wall", "-Werror", "-I", str(uapi.HEADER.parent), "-o", str(exe),
                    str(src)], check=True)
    number, size, reserved_at, partial = map(int, subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True).stdout.split())
    fields = uapi.struct_fields()
    assert number == uapi.ioctl_number()
    assert size == 8 * sum(n for _, n, _ in fields) == 96
    assert reserved_at == 8 * uapi.field_offsets(fields)["reserved"]
    assert partial == int(uapi.defines()["FICLONERANGE2_PARTIAL"])
