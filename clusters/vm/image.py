"""The guest disk image: a Debian bookworm rootfs plus the node's binaries and config.

Two cached stages, each keyed by a content hash of its inputs:

1. ``CACHE/vm/rootfs/<key>/``: ``debootstrap --variant=minbase bookworm`` + packages + the
   kernel (6.12 from bookworm-backports, or bookworm's 6.1). Built inside a private mount
   namespace (``unshare --mount``), so no mount can outlive the build.
2. ``CACHE/vm/images/<key>/``: ``disk.raw`` (``mkfs.ext4 -d`` of the rootfs + binaries +
   units + configs + container image archives), ``vmlinuz``, ``initrd.img``. Boots use a
   qcow2 overlay on top, so the base is never modified.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from clusters import inputs, waits
from clusters.versions import SUPPORTED
from workloads.cache import cache_root

from . import guestfiles
from .build import cache_lock

Progress = Callable[[str], None]

MIRROR_VARIABLE = "KSC_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
KERNELS = ("6.12", "6.1")
DISK_SIZE = "12G"

PACKAGES = (
    "systemd-sysv", "udev", "kmod", "iproute2", "iptables", "procps", "util-linux",
    "ca-certificates", "libseccomp2", "conntrack", "ethtool", "socat", "qemu-guest-agent",
    "mount", "e2fsprogs", "ebtables", "dbus",
)
ROOTFS_RECIPE_VERSION = "3"  # bump when the rootfs recipe below changes
IMAGE_RECIPE_VERSION = "1"


class ImageError(RuntimeError):
    pass


def mirror() -> str:
    """The Debian mirror the guest root filesystems come from: $KSC_DEBIAN_MIRROR, checked
    (clusters/inputs.py declares it), or deb.debian.org. A bad value is a usage error (exit 4)
    that names the variable."""
    return inputs.variable(MIRROR_VARIABLE, DEFAULT_MIRROR)


def _run(argv: list[str], log: Path, what: str, **kw) -> None:
    with open(log, "ab") as f:
        f.write(f"\n$ {' '.join(argv)}\n".encode())
        f.flush()
        rc = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT, **kw)
    if rc != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:]
        raise ImageError(f"{what} failed (exit {rc}); log {log}:\n" + "\n".join(tail))


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


_HASH_CACHE: dict[tuple[str, int, int], str] = {}


def _file_sha(path: Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime) in memory and in the cache dir."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _HASH_CACHE:
        return _HASH_CACHE[key]
    store = cache_root() / "vm" / "hashes.json"
    try:
        disk = json.loads(store.read_text())
    except (OSError, ValueError):
        disk = {}
    skey = f"{key[0]}|{key[1]}|{key[2]}"
    if skey in disk:
        _HASH_CACHE[key] = disk[skey]
        return disk[skey]
    digest = _sha256(path)
    _HASH_CACHE[key] = digest
    disk[skey] = digest
    store.parent.mkdir(parents=True, exist_ok=True)
    tmp = store.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(disk))
    tmp.replace(store)
    return digest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class RootfsRecipe:
    """What a cached Debian rootfs holds: packages, and a kernel unless it is a container's."""

    flavor: str  # "node" (kubeadm node), "kind-host" (Docker engine), "kind-node" (container)
    packages: tuple[str, ...]
    kernel: str | None  # "6.12" or "6.1" for a bootable guest; None for a container image
    version: str = ROOTFS_RECIPE_VERSION

    def key(self) -> str:
        fields: dict[str, object] = {"v": self.version, "suite": SUITE, "mirror": mirror(),
                                     "packages": self.packages, "kernel": self.kernel}
        if self.flavor != "node":  # the node's key predates flavors: keep its caches valid
            fields["flavor"] = self.flavor
        return _digest(fields)

    def describe(self) -> str:
        return f"{self.flavor}, kernel {self.kernel}" if self.kernel else f"{self.flavor}, no kernel"


def node_recipe(kernel: str) -> RootfsRecipe:
    if kernel not in KERNELS:
        raise ImageError(f"kernel {kernel!r} not supported: choose {' or '.join(KERNELS)}")
    return RootfsRecipe("node", PACKAGES, kernel)


def rootfs_key(kernel: str) -> str:
    return node_recipe(kernel).key()


def build_rootfs(recipe: RootfsRecipe | str = "6.12", *, root: Path | None = None,
                 progress: Progress = print) -> Path:
    """Debootstrap a bookworm rootfs for the recipe (a kernel string means the node's); cached."""
    if isinstance(recipe, str):
        recipe = node_recipe(recipe)
    root = root or cache_root()
    key = recipe.key()
    out = root / "vm" / "rootfs" / key
    if (out / ".complete").exists():
        progress(f"image: rootfs {key} ({recipe.describe()}) cached")
        return out
    with cache_lock(root, f"rootfs-{key}", progress):
        if (out / ".complete").exists():
            return out
        return _build_rootfs_locked(recipe, key, out, root, progress)


# The rootfs is built as root in a mount namespace of its own (unshare --mount), so no mount
# outlives the build; the chroot's mounts must be made in that namespace, so the steps are one
# script. The script is a constant: every value (the target directory, which may hold spaces,
# the mirror from the environment, the packages) reaches it as a positional parameter, never as
# shell text.
ROOTFS_SCRIPT = r"""
set -eux
target=$1 suite=$2 mirror=$3 packages=$4 kernel_suite=$5
mount --make-rprivate /
debootstrap --variant=minbase --include="$packages" "$suite" "$target" "$mirror"
if [ -n "$kernel_suite" ]; then
  printf 'deb %s %s-backports main\n' "$mirror" "$suite" > "$target/etc/apt/sources.list.d/backports.list"
  mount -t proc proc "$target/proc"
  mount -t sysfs sys "$target/sys"
  mount --rbind /dev "$target/dev"
  chroot "$target" env DEBIAN_FRONTEND=noninteractive apt-get update
  chroot "$target" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    -t "$kernel_suite" linux-image-amd64 initramfs-tools
fi
chroot "$target" apt-get clean
rm -rf "$target"/var/lib/apt/lists/*
"""


def _build_rootfs_locked(recipe: RootfsRecipe, key: str, out: Path, root: Path, progress: Progress) -> Path:
    tmp = out.with_name(key + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log = root / "logs" / f"rootfs-{key}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    t0 = time.monotonic()
    progress(f"image: debootstrap {SUITE} ({recipe.describe()}) into {tmp} (log {log})")
    kernel_suite = "" if not recipe.kernel else f"{SUITE}-backports" if recipe.kernel == "6.12" else SUITE
    _run(["unshare", "--mount", "--fork", "sh", "-c", ROOTFS_SCRIPT, "sh",
          str(tmp), SUITE, mirror(), ",".join(recipe.packages), kernel_suite],
         log, "debootstrap" + (" and kernel install" if recipe.kernel else ""))
    kernels = sorted((tmp / "boot").glob("vmlinuz-*"))
    if recipe.kernel and not kernels:
        raise ImageError(f"no kernel installed in {tmp}/boot (log {log})")
    what = kernels[-1].name if kernels else "container-rootfs"
    (tmp / ".complete").write_text(f"{what} built in {time.monotonic() - t0:.0f}s\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    progress(f"image: rootfs done in {time.monotonic() - t0:.0f}s ({what})")
    return out


@dataclass
class GuestImage:
    dir: Path
    disk: Path
    kernel: Path
    initrd: Path
    key: str
    kernel_release: str


def build_image(
    *,
    kernel: str | None = None,
    files: Mapping[str, Path | bytes],
    root: Path | None = None,
    progress: Progress = print,
    recipe: RootfsRecipe | None = None,
    units: guestfiles.Units | None = None,
    disk_size: str = DISK_SIZE,
    bake: bool = True,
) -> GuestImage:
    """Assemble the bootable disk: rootfs + ``files`` (guest path -> host file or bytes).

    Host files keep their executable bit; bytes are written 0644 unless the guest path is
    under a ``bin`` directory (then 0755). ``recipe`` defaults to the kubeadm node's for
    ``kernel``, ``units`` to the node's; ``bake`` boots the new disk once so the node's image
    import happens there (a flavor without container images to import passes False).
    """
    root = root or cache_root()
    if recipe is None:
        if kernel is None:
            raise ImageError("build_image needs a kernel or a recipe")
        recipe = node_recipe(kernel)
    if not recipe.kernel:
        raise ImageError(f"a bootable disk needs a kernel; the {recipe.flavor} rootfs has none")
    units = units or guestfiles.NODE_UNITS
    rootfs = build_rootfs(recipe, root=root, progress=progress)
    t0 = time.monotonic()
    inputs: dict[str, str] = {}
    for dest, src in sorted(files.items()):
        if isinstance(src, (bytes, bytearray)):
            inputs[dest] = hashlib.sha256(src).hexdigest()
        else:
            inputs[dest] = _file_sha(Path(src))
    fields: dict[str, object] = {"v": IMAGE_RECIPE_VERSION, "rootfs": rootfs.name, "files": inputs, "size": disk_size}
    if units is not guestfiles.NODE_UNITS or not bake:  # the node's key predates these fields
        fields.update(units=units.key(), bake=bake)
    key = _digest(fields)
    out = root / "vm" / "images" / key
    img = GuestImage(out, out / "disk.raw", out / "vmlinuz", out / "initrd.img", key, "")
    if (out / ".complete").exists():
        img.kernel_release = _used(out)
        progress(f"image: disk {key} cached (hashed inputs in {time.monotonic() - t0:.0f}s)")
        return img
    with cache_lock(root, f"image-{key}", progress):
        if (out / ".complete").exists():
            img.kernel_release = _used(out)
            return img
        return _assemble(img, rootfs, files, root, t0, progress, units=units, disk_size=disk_size, bake=bake)


def _assemble(img: GuestImage, rootfs: Path, files: Mapping[str, Path | bytes], root: Path, t0: float,
              progress: Progress, *, units: "guestfiles.Units", disk_size: str, bake: bool) -> GuestImage:
    key, out = img.key, img.dir
    progress(f"image: assembling disk {key}")
    tmp = out.with_name(key + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    stage = tmp / "stage"
    log = root / "logs" / f"image-{key}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    _run(["cp", "-a", "--reflink=auto", f"{rootfs}/.", str(stage)], log, "copy rootfs")
    (stage / ".complete").unlink(missing_ok=True)
    for dest, src in files.items():
        p = stage / dest.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists() or p.is_symlink():
            p.unlink()
        if isinstance(src, (bytes, bytearray)):
            p.write_bytes(src)
            p.chmod(0o755 if "/bin/" in "/" + dest or "/sbin/" in "/" + dest else 0o644)
        else:
            shutil.copy2(src, p)
    guestfiles.finalize_rootfs(stage, units)
    kernels = sorted((stage / "boot").glob("vmlinuz-*"))
    if not kernels:
        raise ImageError(f"kernel missing in {stage}/boot")
    release = kernels[-1].name[len("vmlinuz-"):]
    initrd = stage / "boot" / f"initrd.img-{release}"
    if not initrd.exists():
        raise ImageError(f"initrd {initrd} missing")
    shutil.copy2(kernels[-1], tmp / "vmlinuz")
    shutil.copy2(initrd, tmp / "initrd.img")
    for junk in (stage / "boot").glob("initrd.img-*.*"):  # .dpkg-bak/.new leftovers
        if junk.name.endswith((".dpkg-bak", ".new")):
            junk.unlink()
    _run(["mkfs.ext4", "-q", "-F", "-L", "kscroot", "-E", "root_owner=0:0", "-d", str(stage),
          str(tmp / "disk.raw"), disk_size], log, "mkfs.ext4 -d")
    shutil.rmtree(stage)
    if bake:
        _bake(tmp, root, progress)
    (tmp / ".complete").write_text(f"{release} built in {time.monotonic() - t0:.0f}s\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    img.kernel_release = release
    _prune(root / "vm" / "images", keep=KEPT_DISKS)
    progress(f"image: disk {key} built in {time.monotonic() - t0:.0f}s (kernel {release})")
    return img


# A disk per supported minor, the kind host's, and one patched build's (the KEP-5359 prototype, a
# mutant's fresh VM), pruned by last use: the version matrix then evicts none of the disks it
# boots in turn, and a run of patched builds evicts the disks used longest ago.
KEPT_DISKS = len(SUPPORTED) + 2


def _used(disk: Path) -> str:
    """Stamp a cached disk as used now (what pruning orders by); its kernel release."""
    (disk / ".used").touch()
    return (disk / ".complete").read_text().split()[0]


def _last_use(disk: Path) -> float:
    stamps = [disk / ".complete", disk / ".used"]
    return max(p.stat().st_mtime for p in stamps if p.exists())


def _prune(images: Path, keep: int) -> None:
    """Drop all but the ``keep`` disks used last (sparse files of 12 GB and more); a build under
    way (no ``.complete`` yet) is never dropped."""
    done = sorted((d for d in images.iterdir() if (d / ".complete").exists()), key=_last_use, reverse=True)
    for d in done[keep:]:
        shutil.rmtree(d, ignore_errors=True)


def _bake(tmp: Path, root: Path, progress: Progress) -> None:
    """Boot the new disk once (no overlay) so containerd imports the image archives into it.

    Every later boot then finds the images already unpacked (the import unit skips archives
    marked ``.imported``), which saves minutes per start under emulation.
    """
    from . import qemu

    t0 = time.monotonic()
    progress("image: baking: first boot imports the container images into the base disk")
    paths = qemu.VmPaths(root / "vm" / "bake-run")
    qemu.stop_qemu(paths)
    qemu.start_qemu(paths, disk=tmp / "disk.raw", kernel=tmp / "vmlinuz", initrd=tmp / "initrd.img",
                    memory_mb=2048, cpus=2, swap_mb=0, use_overlay=False, name="ksc-bake")
    agent = qemu.GuestAgent(paths.qga, watch=lambda: qemu.check_guest(paths))
    try:
        deadline = time.monotonic() + waits.bound(waits.VM_BAKE_IMPORT)
        state = "agent not answering"
        while time.monotonic() < deadline:
            qemu.check_guest(paths)  # gone or stopped by QEMU: fail now, not at the deadline
            try:  # an answer lost is a look lost (decision 0037): the agent's watch raises if the guest is gone
                state = agent.exec(["systemctl", "is-active", "ksc-images.service"], timeout=60)[1].strip() \
                    if agent.ping(3) else "agent not answering"
            except qemu.NO_ANSWER as error:
                state = qemu.no_answer_said(error)
            if state == "active":
                break
            if state == "failed":
                try:
                    _, j, _ = agent.exec(["journalctl", "-b", "-u", "ksc-images", "--no-pager", "-n", "40"])
                except (OSError, qemu.AgentError) as error:
                    j = qemu.journal_unread(error)
                raise ImageError(f"bake boot: image import failed:\n{j}")
            time.sleep(3)
        else:
            raise ImageError(f"bake boot: timed out waiting for the image import (last: {state})")
        agent.exec(["sh", "-c", "rm -f /var/log/journal/*/* ; sync"], timeout=120)
        try:
            agent.spawn(["systemctl", "poweroff"])
        except Exception:  # noqa: BLE001, S110 - the agent may die mid-answer
            pass
        pid = qemu.read_pid(paths)
        if pid is not None and not qemu.wait_gone(pid, waits.bound(waits.VM_BAKE_POWEROFF)):
            # Killed, its filesystem was never unmounted: a base disk every later boot starts
            # from must not be one whose journal still has to be replayed, or worse.
            raise ImageError(f"bake boot: the guest did not power off within {waits.bound(waits.VM_BAKE_POWEROFF):.0f}s"
                             f" after its sync; the disk is not kept (the build starts it again next time)")
    except qemu.GuestStopped as error:
        raise ImageError(f"bake boot: {error}") from None
    finally:
        qemu.stop_qemu(paths)
    progress(f"image: baked in {time.monotonic() - t0:.0f}s")


if __name__ == "__main__":  # pragma: no cover - manual use
    import sys

    from .progress import stderr_progress

    print(build_rootfs(sys.argv[1] if len(sys.argv) > 1 else "6.12", progress=stderr_progress()))
