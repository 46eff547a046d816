"""FICLONERANGE2 from Python: struct file_clone_range2 as the series' uapi
header defines it (read by harness.uapi), and the call through libc."""
import ctypes
import errno
import os
import struct

from harness import uapi

FICLONERANGE2 = uapi.ioctl_number()
_libc = ctypes.CDLL(None, use_errno=True)


class CloneRange2:
    """struct file_clone_range2, its fields in the header's order (positional
    or by name, arrays flattened into `fields`); call() issues FICLONERANGE2
    and, like the kernel, leaves the written-back cursor in the object even on
    errors."""
    LAYOUT = uapi.struct_fields()
    FORMAT = "=" + "".join(f"{n}{'q' if signed else 'Q'}" for _, n, signed in LAYOUT)
    INDEX = uapi.field_offsets(LAYOUT)

    def __init__(self, *args, **kwargs):
        named = dict(zip(self.INDEX, args))
        unknown = set(kwargs) - set(self.INDEX)
        if unknown or set(named) & set(kwargs):
            raise TypeError(f"CloneRange2: bad arguments {sorted(unknown or set(named) & set(kwargs))}")
        named.update(kwargs)
        self.fields = []
        for name, n, _ in self.LAYOUT:
            value = named.get(name, 0 if n == 1 else (0,) * n)
            self.fields += list(value) if n > 1 else [value]

    src_length = property(lambda self: self.fields[self.INDEX["src_length"]])
    done = property(lambda self: self.fields[self.INDEX["done"]])

    @property
    def next_chunk(self):
        return self.fields[self.INDEX["next_chunk"]]

    @next_chunk.setter
    def next_chunk(self, value):
        self.fields[self.INDEX["next_chunk"]] = value

    def call(self, dst_fd):
        """One ioctl through libc, so EINTR reaches the caller instead of
        being retried by Python (PEP 475)."""
        buf = ctypes.create_string_buffer(struct.pack(self.FORMAT, *self.fields),
                                          struct.calcsize(self.FORMAT))
        ret = _libc.ioctl(dst_fd, ctypes.c_ulong(FICLONERANGE2), buf)
        err = ctypes.get_errno()
        self.fields = list(struct.unpack(self.FORMAT, buf.raw))
        if ret < 0:
            raise OSError(err, os.strerror(err))
        return ret


def has_ficlonerange2(fd):
    """Probe with an invalid flag: EINVAL means the kernel knows the call."""
    try:
        CloneRange2(fd, flags=1 << 63).call(fd)
    except OSError as e:
        return e.errno != errno.ENOTTY
    return True
