#!/usr/bin/env python3
"""Container images on btrfs snapshots, inside a guest.

Builds an image from the host's own files (the guest's root is the host's /
over 9p): Debian's python3 interpreter, its standard library with compiled
bytecode, and every shared library the interpreter and its extension
modules link, laid out so that the image can be chrooted into. The image is
one subvolume, and an "upgraded" image is a snapshot in which every
UPGRADE_EVERY-th file was rewritten (the same bytes in new extents, as a
layered image store's new version of a file that changed). A container's
root is, by --layout:
  snapshots     a writable snapshot of the image (Docker's and Podman's
                btrfs storage drivers)
  overlay       an overlayfs mount with a read-only snapshot of the image
                as its lower layer, shared by all containers, and an upper
                directory of its own (the overlay driver on btrfs)
  ro-snapshots  a read-only snapshot of the image of its own (received
                or snapper-style roots)

For each N, with caches dropped first, two steps are measured over N
containers (fsutil.Meter: page cache growth, bytes read from the disk,
shared cache counters, time):
  read_all    read every file of every container with read(2)
  entrypoint  in every container, chrooted, the interpreter imports a good
              part of its standard library (exec, mmap of the libraries,
              read of the bytecode), as a container start does; one
              container after the other, each gone before the next starts
  running     the same entrypoints started together, measured while all
              of them still run: what N services side by side hold
and both again over one container of the image and one of the upgraded
image (steps read_all_upgrade and entrypoint_upgrade); and fork_exit: one
process maps the first container's interpreter privately (as ld.so maps
programs and libraries) and forks FORKS children
that read every page of it and exit, as a pre-forking server does (mmap,
fork and exit of a mapping, for the locks they take).
"""
import json
import mmap
import os
import shutil
import subprocess
from pathlib import Path

from harness import fsutil

INTERPRETER = fsutil.SYSTEM_PYTHON
UPGRADE_EVERY = 4
# Modules a service might import at start: pure Python and extension
# modules that link libssl, libsqlite3, libffi, libmpdec, liblzma, libbz2.
ENTRYPOINT_MODULES = (
    "argparse asyncio base64 bz2 collections concurrent.futures contextlib csv "
    "ctypes dataclasses datetime decimal difflib email.mime.text email.parser "
    "enum fractions functools gzip hashlib heapq hmac html.parser http.client "
    "http.server inspect ipaddress json logging.handlers lzma mimetypes "
    "multiprocessing pathlib pickle pydoc random re secrets shlex shutil "
    "socket sqlite3 ssl statistics string subprocess tarfile tempfile textwrap "
    "threading tomllib typing unittest urllib.request uuid xml.dom.minidom "
    "xml.etree.ElementTree zipfile zoneinfo").split()
SMOKE_MODULES = "json hashlib decimal".split()
ENTRYPOINT = ("import sys, importlib; mods = sys.argv[1:]\n"
              "for m in mods: importlib.import_module(m)\n"
              "import hashlib; print('entrypoint ok', len(mods),"
              " hashlib.sha256(' '.join(mods).encode()).hexdigest()[:16],"
              " flush=True)")
# Then it stays up, its mappings alive, until its stdin closes.
SERVICE = ENTRYPOINT + "\nsys.stdin.read()"


def install(path, root):
    """Copy host file `path` into image `root` at the same path, recreating
    every symlink on the way (Debian's /lib64 -> usr/lib64, libfoo.so.1 ->
    libfoo.so.1.2.3) so the dynamic loader finds what it looks for."""
    parts = Path(os.path.abspath(path)).parts[1:]
    current = Path("/")
    for i, part in enumerate(parts):
        current = current / part
        if current.is_symlink():
            link = os.readlink(current)
            if os.path.isabs(link):   # keep it inside the image
                link = os.path.relpath(link, current.parent)
            target = root / current.relative_to("/")
            if not target.is_symlink():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(link)
            real = Path(os.path.normpath(current.parent / link))
            install(real.joinpath(*parts[i + 1:]), root)
            return
    target = root / current.relative_to("/")
    if current.is_dir():
        target.mkdir(parents=True, exist_ok=True)
    elif not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(current, target)


def linked_libraries(binaries):
    """Paths of the shared libraries (and loader) that `binaries` need."""
    libs = set()
    for binary in binaries:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            words = line.split()
            if "=>" in words and len(words) > words.index("=>") + 1:
                lib = words[words.index("=>") + 1]
                if lib.startswith("/"):
                    libs.add(lib)
            elif words and words[0].startswith("/"):
                libs.add(words[0])
    return sorted(libs)


def build_image(root):
    """Fill subvolume `root`; returns (files, bytes) of the regular files."""
    stdlib = fsutil.system_python_stdlib()
    install(INTERPRETER, root)
    skip = {"test", "idlelib", "tkinter", "turtledemo", "site-packages", "dist-packages",
            "lib2to3", "ensurepip"}
    modules = []
    for dirpath, dirnames, filenames in os.walk(stdlib):
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            install(path, root)
            if name.endswith(".so"):
                modules.append(path)
    for lib in linked_libraries([Path(INTERPRETER).resolve(), *modules]):
        install(lib, root)
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    return len(files), sum(p.stat().st_size for p in files)


def upgrade(image):
    """Rewrite every UPGRADE_EVERY-th regular file of `image` in place (new
    extents, same bytes); returns the bytes rewritten."""
    files = sorted(p for p in image.rglob("*") if p.is_file() and not p.is_symlink())
    rewritten = 0
    for path in files[::UPGRADE_EVERY]:
        data = path.read_bytes()
        st = path.stat()
        with open(path, "r+b") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # A new version ships bytecode that matches its sources: keep the
        # times, or the interpreter would compile every rewritten module.
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        rewritten += len(data)
    return rewritten


def read_all(roots):
    for root in roots:
        for dirpath, _, filenames in os.walk(root):
            for name in filenames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    fsutil.read_through(path)


def start_in(root, script, modules, **popen):
    return subprocess.Popen([INTERPRETER, "-I", "-B", "-c", script, *modules],
                            preexec_fn=lambda r=str(root): (os.chroot(r), os.chdir("/")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"PATH": "/usr/bin", "LANG": "C.UTF-8"}, **popen)


def check_started(root, modules, returncode, out, err):
    """Every entrypoint must print the same line, naming all the modules it
    imported."""
    if returncode not in (0, None) or not out.startswith(f"entrypoint ok {len(modules)} "):
        raise SystemExit(f"entrypoint in {root} failed ({returncode}): {out}{err}")


def entrypoint(roots, modules):
    """Run the entrypoint chrooted in each root, one after the other."""
    for root in roots:
        proc = start_in(root, ENTRYPOINT, modules)
        out, err = proc.communicate()
        check_started(root, modules, proc.returncode, out, err)


def running(roots, modules):
    """Start the entrypoint in every root at once; return, once all have
    imported their modules, a function that stops them."""
    procs = [start_in(root, SERVICE, modules, stdin=subprocess.PIPE) for root in roots]
    started = []
    for root, proc in zip(roots, procs):
        line = proc.stdout.readline()
        if not line:
            proc.stdin.close()
            out, err = proc.communicate()
            check_started(root, modules, proc.returncode, out, err)
        check_started(root, modules, None, line, "")
        started.append(line)

    def stop():
        for root, proc, line in zip(roots, procs, started):
            out, err = proc.communicate(input="")
            check_started(root, modules, proc.returncode, line + out, err)
    return stop


FORKS = 64


def fork_exit(roots):
    # Private, as ld.so maps a program and its libraries.
    path = roots[0] / Path(INTERPRETER).resolve().relative_to("/")
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    pids = []
    for _ in range(FORKS):
        pid = os.fork()
        if pid == 0:
            pages = sum(1 for i in range(0, len(mapped), mmap.PAGESIZE) if mapped[i] >= 0)
            os._exit(0 if pages == -(-len(mapped) // mmap.PAGESIZE) else 1)
        pids.append(pid)
    failed = [pid for pid in pids if os.waitpid(pid, 0)[1]]
    mapped.close()
    if failed:
        raise SystemExit(f"fork_exit: {len(failed)} children failed")


def writable_snapshot(mnt, image, name):
    fsutil.run("btrfs", "subvolume", "snapshot", str(mnt / image), str(mnt / name))


def read_only_snapshot(mnt, image, name):
    fsutil.run("btrfs", "subvolume", "snapshot", "-r", str(mnt / image), str(mnt / name))


OVERLAYS = []


def overlay(mnt, image, name):
    """NAME: an overlayfs root over IMAGE's read-only snapshot, made once
    per image and shared by its containers."""
    lower = mnt / f"{image}-ro"
    if not lower.exists():
        read_only_snapshot(mnt, image, lower.name)
    parts = [mnt / f"{name}-{part}" for part in ("upper", "work")]
    for d in parts + [mnt / name]:
        d.mkdir()
    fsutil.run("mount", "-t", "overlay", "overlay", "-o",
               f"lowerdir={lower},upperdir={parts[0]},workdir={parts[1]}", str(mnt / name))
    OVERLAYS.append(mnt / name)


LAYOUTS = {"snapshots": writable_snapshot, "overlay": overlay,
           "ro-snapshots": read_only_snapshot}


def main():
    ap = fsutil.bench_arg_parser(__doc__, size=False)
    ap.add_argument("--containers", default="1,2,4,8", help="values of N")
    ap.add_argument("--layout", choices=LAYOUTS, default="snapshots",
                    help="what a container's root is (see above)")
    ap.add_argument("--smoke", action="store_true",
                    help="N = 1, 2 and three modules (the test suite's run)")
    args = ap.parse_args()
    counts = [1, 2] if args.smoke else [int(n) for n in args.containers.split(",")]
    modules = SMOKE_MODULES if args.smoke else ENTRYPOINT_MODULES
    meter = fsutil.Meter(args.device)
    runs = []
    with fsutil.bench_btrfs(args) as mnt:
        fsutil.run("btrfs", "subvolume", "create", str(mnt / "image"))
        files, size = build_image(mnt / "image")
        fsutil.run("btrfs", "subvolume", "snapshot", str(mnt / "image"), str(mnt / "image-v2"))
        rewritten = upgrade(mnt / "image-v2")
        make_root = LAYOUTS[args.layout]
        for i in range(max(counts)):
            make_root(mnt, "image", f"c{i}")
        make_root(mnt, "image-v2", "u0")
        print(f"containers: image {files} files, {size >> 20} MiB; upgrade rewrote "
              f"{rewritten >> 20} MiB", flush=True)

        def record(step, n, roots, fn):
            """A step's row; fn may return a function to call after the
            measurement, to stop what must still run while it is taken."""
            fsutil.drop_caches()
            after = []
            row = {"step": step, "containers": n,
                   **meter.measure(lambda: after.append(fn(roots)))}
            if after[0]:
                after[0]()
            runs.append(row)
            print(f"containers: {step:18} N={n}  cache +{row['cache_growth_bytes'] >> 20:5} MiB"
                  f"  disk {row['disk_read_bytes'] >> 20:5} MiB  {row['seconds']:7.2f} s",
                  flush=True)

        for n in counts:
            roots = [mnt / f"c{i}" for i in range(n)]
            record("read_all", n, roots, read_all)
            record("entrypoint", n, roots, lambda r: entrypoint(r, modules))
            record("running", n, roots, lambda r: running(r, modules))
        pair = [mnt / "c0", mnt / "u0"]
        record("read_all_upgrade", 2, pair, read_all)
        record("entrypoint_upgrade", 2, pair, lambda r: entrypoint(r, modules))
        record("fork_exit", FORKS, [mnt / "c0"], fork_exit)
        for top in OVERLAYS:
            fsutil.run("umount", str(top))
    result = {"image_bytes": size, "image_files": files, "upgrade_bytes_rewritten": rewritten,
              "upgrade_every": UPGRADE_EVERY, "entrypoint_modules": modules,
              "kernel_release": os.uname().release, "mount_options": args.mount_options,
              "layout": args.layout, "runs": runs}
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
