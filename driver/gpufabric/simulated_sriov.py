# SPDX-License-Identifier: Apache-2.0
"""A SIMULATED kernel for SR-IOV on a simulated sysfs tree: tests and lab only, never production.

``gpufabric.simulated_hw`` writes trees whose ConnectX physical functions have
``sriov_totalvfs``; this module makes writes into such a tree behave like the
Linux PCI core and mlx5 would, and answers ``ip`` for its devices:

- ``sriov_numvfs``: the same value is a no-op; a nonzero count over another
  nonzero one fails with EBUSY, a count above ``sriov_totalvfs`` with ERANGE;
  otherwise VF functions appear next to the PF (address from ``sriov_offset``
  and ``sriov_stride``, ``physfn``/``virtfnN`` links, ``sriov_vf_device``), bound to
  the PF's driver, each with a netdev (``<pf>v<n>``) and an RDMA device, or go away.
- ``/sys/bus/pci/drivers/<drv>/unbind`` and ``bind`` (VFs only): the netdev and RDMA
  device go away and come back; the RDMA device's ``node_guid`` is the VF's admin
  node GUID at bind time, which is why GUIDs need a rebind to take effect.
- ``ip -j -d link show dev PF`` and ``ip link set dev PF vf N mac|node_guid|port_guid|
  trust|spoofchk|vlan|state V``: the VF admin state lives in ``<root>/SIMULATED-vf-state.json``.

Two ways to use it: in-process, ``gpufabric.simulated_sriov_host.SimulatedSriovHost(root)``
is ``sriov.Host`` (module_utils) with this kernel reacting on each write, raising OSError as
the kernel's write(2) would; or as processes: ``watch`` reacts to writes in the tree (woken by
inotify, so an idle lab host costs no CPU; a change the kernel would refuse is reverted and logged
to ``<root>/SIMULATED-kernel-refusals.log``, since a file write cannot fail), ``ip`` stands in for
/usr/sbin/ip (devices outside the tree go to the real ip) and ``reset`` removes all VFs and their
state, as a fresh boot would.

Standard library only and a single file: molecule copies it into containers.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import select
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# With inotify, the watch daemon wakes on a write and at least this often (a write it could not watch).
IDLE_WAKE_S = 1.0
IN_CLOSE_WRITE = 0x00000008  # <sys/inotify.h>
STATE_FILE = "SIMULATED-vf-state.json"
LOCK_FILE = "SIMULATED-vf-state.lock"
KERNEL_LOCK = "SIMULATED-kernel.lock"  # one watch round or one reset at a time
REFUSALS_LOG = "SIMULATED-kernel-refusals.log"
PCI_DEVICES = "sys/bus/pci/devices"
PCI_DRIVERS = "sys/bus/pci/drivers"
VIRTFN = re.compile(r"^virtfn(\d+)$")
GUID = re.compile(r"^[0-9a-f]{2}(?::[0-9a-f]{2}){7}$")
MAC = re.compile(r"^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$")
REAL_IP = ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip")
ZERO_MAC = "00:00:00:00:00:00"
ZERO_GUID = "00:00:00:00:00:00:00:00"
IB_BROADCAST = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"
EINVAL_ANSWER = "RTNETLINK answers: Invalid argument\n"
EOPNOTSUPP_ANSWER = "RTNETLINK answers: Operation not supported\n"


def _error(code: int, detail: str) -> OSError:
    return OSError(code, f"{os.strerror(code)} (simulated kernel: {detail})")


def vf_address(pf_address: str, offset: int, stride: int, index: int) -> str:
    """PCI address of VF ``index``: the PF's routing id + offset + index * stride."""
    domain, bus, rest = pf_address.split(":")
    device, function = rest.split(".")
    rid = (int(bus, 16) << 8 | int(device, 16) << 3 | int(function)) + offset + index * stride
    return f"{domain}:{rid >> 8 & 0xFF:02x}:{rid >> 3 & 0x1F:02x}.{rid & 7}"


def _sysfs_guid(guid: str) -> str:
    digits = guid.replace(":", "")
    return ":".join(digits[i : i + 4] for i in range(0, 16, 4))


class Kernel:
    """The reactions, on a tree below ``root``."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    # -- files -------------------------------------------------------------

    def _link(self, link: Path, target: Path) -> None:
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(target, link.parent))

    @staticmethod
    def _file(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{text}\n", encoding="utf-8")

    @staticmethod
    def _text(path: Path, default: str = "") -> str:
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError:
            return default

    def prepare(self) -> None:
        """Give every driver directory its bind and unbind files."""
        drivers = self.root / PCI_DRIVERS
        for driver in sorted(drivers.iterdir()) if drivers.is_dir() else []:
            for name in ("bind", "unbind"):
                if not (driver / name).exists():
                    (driver / name).write_text("", encoding="utf-8")

    def device(self, address: str) -> Path:
        return (self.root / PCI_DEVICES / address).resolve()

    def physical_functions(self) -> list[str]:
        devices = self.root / PCI_DEVICES
        return sorted(
            link.name
            for link in (devices.iterdir() if devices.is_dir() else [])
            if (link / "sriov_numvfs").exists() and not (link / "physfn").is_symlink()
        )

    @staticmethod
    def virtfns(pf: Path) -> dict[int, Path]:
        found = {}
        for entry in pf.iterdir():
            match = VIRTFN.match(entry.name)
            if match:
                found[int(match.group(1))] = entry
        return dict(sorted(found.items()))

    # -- VF admin state ----------------------------------------------------

    @contextlib.contextmanager
    def state(self) -> Iterator[dict[str, Any]]:
        """The VF admin state, locked against the other processes (watch, ip) for a read-modify-write."""
        with open(self.root / LOCK_FILE, "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = self.root / STATE_FILE
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
            yield data
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(temporary, path)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held by each watch round and by reset, so a reset never races the daemon."""
        with open(self.root / KERNEL_LOCK, "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    # -- sriov_numvfs ------------------------------------------------------

    def change_numvfs(self, address: str, text: str) -> None:
        """React to ``text`` written to the PF's sriov_numvfs: OSError as the kernel, else create/remove VFs."""
        pf = self.device(address)
        try:
            value = int(text.strip())
        except ValueError:
            raise _error(errno.EINVAL, f"{text.strip()!r} is not a number") from None
        total = int(self._text(pf / "sriov_totalvfs", "0"))
        current = len(self.virtfns(pf))
        if value == current:
            return
        if value < 0:
            raise _error(errno.EINVAL, f"{value} is negative")
        if value > total:
            raise _error(errno.ERANGE, f"{value} VFs requested, sriov_totalvfs is {total}")
        if current and value:
            raise _error(errno.EBUSY, f"{current} VFs already enabled; disable before enabling {value}")
        if value:
            self._create_vfs(address, value)
        else:
            self._remove_vfs(address)

    def _create_vfs(self, address: str, count: int) -> None:
        pf = self.device(address)
        offset, stride = int(self._text(pf / "sriov_offset", "1")), int(self._text(pf / "sriov_stride", "1"))
        driver = os.path.basename(os.readlink(pf / "driver")) if (pf / "driver").is_symlink() else None
        default: dict[str, Any] = {"mac": ZERO_MAC, "node_guid": ZERO_GUID, "port_guid": ZERO_GUID}
        default |= {"trust": False, "spoofchk": False, "vlan": 0, "link_state": "auto"}
        with self.state() as state:
            state[address] = {str(n): dict(default) for n in range(count)}
        for index in range(count):
            vf = pf.parent / vf_address(address, offset, stride, index)
            self._file(vf / "vendor", self._text(pf / "vendor"))
            self._file(vf / "device", f"0x{self._text(pf / 'sriov_vf_device', '101e')}")
            self._file(vf / "class", self._text(pf / "class"))
            self._file(vf / "numa_node", self._text(pf / "numa_node", "-1"))
            self._link(vf / "physfn", pf)
            self._link(self.root / PCI_DEVICES / vf.name, vf)
            if driver:
                self._probe(vf, driver)
            self._link(pf / f"virtfn{index}", vf)  # last: a waiter counting virtfn links sees complete VFs

    def _remove_vfs(self, address: str) -> None:
        pf = self.device(address)
        for _index, link in sorted(self.virtfns(pf).items(), reverse=True):
            vf = link.resolve()
            self._release(vf)
            (self.root / PCI_DEVICES / vf.name).unlink(missing_ok=True)
            shutil.rmtree(vf, ignore_errors=True)
            link.unlink()
        with self.state() as state:
            state.pop(address, None)

    # -- driver bind/unbind ------------------------------------------------

    def _vf_index(self, vf: Path) -> tuple[Path, int]:
        pf = (vf / "physfn").resolve()
        for index, link in self.virtfns(pf).items():
            if link.resolve() == vf:
                return pf, index
        # Being created: the virtfn link comes last; the address says the index.
        offset, stride = int(self._text(pf / "sriov_offset", "1")), int(self._text(pf / "sriov_stride", "1"))
        index = 0
        while vf_address(pf.name, offset, stride, index) != vf.name:
            index += 1
        return pf, index

    def _probe(self, vf: Path, driver: str) -> None:
        """The driver binds: a netdev and an RDMA device like the PF's, named after it."""
        self._link(vf / "driver", self.root / PCI_DRIVERS / driver)
        pf, index = self._vf_index(vf)
        with self.state() as state:
            admin = state.get(pf.name, {}).get(str(index), {})
        netdev = None
        pf_nets = sorted((pf / "net").iterdir()) if (pf / "net").is_dir() else []
        if pf_nets:
            netdev = f"{pf_nets[0].name}v{index}"[:15]
            net = vf / "net" / netdev
            infiniband = self._text(pf_nets[0] / "type") == "32"
            if infiniband:
                address = "00:00:10:49:fe:80:00:00:00:00:00:00:" + admin.get("port_guid", ZERO_GUID)
            else:
                mac = admin.get("mac", ZERO_MAC)
                octets = [*vf.name.replace(":", ".").split(".")[1:], f"{index:02x}"]
                address = mac if mac != ZERO_MAC else ":".join(["0e", "00", *(o[-2:] for o in octets)])
            self._file(net / "address", address)
            for name in ("type", "mtu", "speed", "operstate", "carrier"):
                self._file(net / name, self._text(pf_nets[0] / name))
            self._link(net / "device", vf)
            self._link(self.root / "sys/class/net" / netdev, net)
        pf_rdma = sorted((pf / "infiniband").iterdir()) if (pf / "infiniband").is_dir() else []
        if pf_rdma:
            taken = {entry.name for entry in (self.root / "sys/class/infiniband").iterdir()}
            name = next(f"mlx5_{n}" for n in range(len(taken) + 1) if f"mlx5_{n}" not in taken)
            rdma, port = vf / "infiniband" / name, pf_rdma[0] / "ports" / "1"
            node_guid = admin.get("node_guid", ZERO_GUID)
            self._file(rdma / "node_type", "1: CA")
            self._file(rdma / "node_guid", _sysfs_guid(node_guid))
            for item in ("state", "phys_state", "rate", "link_layer", "lid", "sm_lid"):
                self._file(rdma / "ports/1" / item, self._text(port / item))
            for pkey in range(4):
                self._file(rdma / f"ports/1/pkeys/{pkey}", "0xffff" if pkey == 0 else "0x0000")
            port_guid = _sysfs_guid(admin.get("port_guid", ZERO_GUID))
            for gid in range(8):
                self._file(
                    rdma / f"ports/1/gids/{gid}",
                    f"fe80:0000:0000:0000:{port_guid}" if gid == 0 else "0000:" * 7 + "0000",
                )
            if self._text(port / "link_layer") == "Ethernet" and netdev:
                self._file(rdma / "ports/1/gid_attrs/ndevs/0", netdev)
                self._file(rdma / "ports/1/gid_attrs/types/0", "RoCE v2")
            self._link(rdma / "device", vf)
            self._link(self.root / "sys/class/infiniband" / name, rdma)

    def _release(self, vf: Path) -> None:
        """The driver lets go: its netdev and RDMA device disappear."""
        for kind, cls in (("net", "sys/class/net"), ("infiniband", "sys/class/infiniband")):
            for entry in sorted((vf / kind).iterdir()) if (vf / kind).is_dir() else []:
                (self.root / cls / entry.name).unlink(missing_ok=True)
                shutil.rmtree(entry)
        (vf / "driver").unlink(missing_ok=True)

    def _vf_device(self, address: str) -> Path:
        link = self.root / PCI_DEVICES / address
        if not link.exists():
            raise _error(errno.ENODEV, f"no PCI device {address}")
        if not (link / "physfn").is_symlink():
            raise _error(errno.EPERM, f"only virtual functions are rebound here, {address} is not one")
        return link.resolve()

    def unbind(self, driver: str, address: str) -> None:
        vf = self._vf_device(address.strip())
        bound = os.path.basename(os.readlink(vf / "driver")) if (vf / "driver").is_symlink() else None
        if bound != driver:
            raise _error(errno.ENODEV, f"{address.strip()} is not bound to {driver}")
        self._release(vf)

    def bind(self, driver: str, address: str) -> None:
        vf = self._vf_device(address.strip())
        if (vf / "driver").is_symlink():
            raise _error(errno.EBUSY, f"{address.strip()} is already bound")
        if not (self.root / PCI_DRIVERS / driver).is_dir():
            raise _error(errno.ENODEV, f"no driver {driver}")
        self._probe(vf, driver)

    # -- ip ----------------------------------------------------------------

    def ip(self, args: list[str]) -> tuple[int, str, str] | None:
        """Answer ``ip [-j] [-d] link show|set [dev] NAME ...`` for a netdev in the tree; None: not ours."""
        args, as_json = list(args), False
        while args and args[0].startswith("-"):
            option = args.pop(0)
            if option in ("-j", "-json"):
                as_json = True
            elif option not in ("-d", "-details"):
                return None
        if len(args) < 3 or args[0] not in ("link", "l"):
            return None
        verb, rest = args[1], args[2:]
        if rest[0] == "dev":
            rest = rest[1:]
        if not rest or not (self.root / "sys/class/net" / rest[0] / "device").exists():
            return None
        name, rest = rest[0], rest[1:]
        pf = (self.root / "sys/class/net" / name / "device").resolve()
        if verb in ("show", "list", "sh"):
            return 0, self._show(name, pf, as_json), ""
        if verb == "set" and len(rest) >= 4 and rest[0] == "vf":
            return self._set(pf, rest[1], rest[2:])
        return 2, "", f"simulated ip: only 'link set dev {name} vf N KEY VALUE ...' is simulated\n"

    def _show(self, name: str, pf: Path, as_json: bool) -> str:
        net = self.root / "sys/class/net" / name
        infiniband = self._text(net / "type") == "32"
        link: dict[str, Any] = {
            "ifname": name,
            "mtu": int(self._text(net / "mtu", "1500")),
            "operstate": self._text(net / "operstate", "unknown").upper(),
            "link_type": "infiniband" if infiniband else "ether",
            "address": self._text(net / "address"),
        }
        if (pf / "sriov_numvfs").exists():
            with self.state() as state:
                vfs = state.get(pf.name, {})
            link["num_vf"] = len(vfs)
            link["vfinfo_list"] = [self._vfinfo(int(n), vfs[n], infiniband) for n in sorted(vfs, key=int)]
        if as_json:
            return json.dumps([link]) + "\n"
        lines = [
            f"{name}: mtu {link['mtu']} state {link['operstate']}",
            f"    link/{link['link_type']} {link['address']}",
        ]
        for vf in link.get("vfinfo_list", []):
            lines.append(f"    vf {vf['vf']}     link/{vf['link_type']} {vf['address']}, trust {vf['trust']}")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _vfinfo(index: int, admin: dict[str, Any], infiniband: bool) -> dict[str, Any]:
        """One vfinfo_list entry with iproute2's keys (ip/ipaddress.c print_vfinfo)."""
        vlan = {"vlan": admin["vlan"]} if admin["vlan"] else {}
        entry: dict[str, Any] = {
            "vf": index,
            "link_type": "infiniband" if infiniband else "ether",
            "address": ":".join(["00"] * 20) if infiniband else admin["mac"],
            "broadcast": IB_BROADCAST if infiniband else "ff:ff:ff:ff:ff:ff",
            "vlan_list": [vlan],
            "rate": {"max_tx": 0, "min_tx": 0},
            "spoofchk": admin["spoofchk"],
        }
        if infiniband:
            entry |= {"node guid": admin["node_guid"], "port guid": admin["port_guid"]}
        entry |= {"link_state": admin["link_state"], "trust": admin["trust"], "query_rss_en": False}
        return entry

    def _set(self, pf: Path, number: str, pairs: list[str]) -> tuple[int, str, str]:
        infiniband = self._text(pf / "class").startswith("0x0207") or any(
            self._text(net / "type") == "32" for net in ((pf / "net").iterdir() if (pf / "net").is_dir() else [])
        )
        if len(pairs) % 2:
            return 255, "", 'Command line is not complete. Try "ip link help".\n'
        with self.state() as state:
            vfs = state.get(pf.name, {})
            if not number.isdigit() or number not in vfs:
                return 2, "", EINVAL_ANSWER
            admin = dict(vfs[number])
            for key, value in zip(pairs[::2], pairs[1::2], strict=True):
                value = value.lower()
                if key == "mac":
                    if infiniband:
                        return 2, "", EOPNOTSUPP_ANSWER
                    if not MAC.match(value):
                        return 255, "", f'Error: argument "{value}" is wrong: Invalid MAC address\n'
                    admin["mac"] = value
                elif key in ("node_guid", "port_guid"):
                    if not infiniband:
                        return 2, "", EOPNOTSUPP_ANSWER
                    if not GUID.match(value):
                        return 255, "", f'Error: argument "{value}" is wrong: Invalid GUID format.\n'
                    admin[key] = value
                elif key in ("trust", "spoofchk") and value in ("on", "off"):
                    if infiniband:
                        return 2, "", EOPNOTSUPP_ANSWER
                    admin[key] = value == "on"
                elif key == "vlan" and value.isdigit() and int(value) <= 4095:
                    if infiniband:
                        return 2, "", EOPNOTSUPP_ANSWER
                    admin["vlan"] = int(value)
                elif key == "state" and value in ("auto", "enable", "disable"):
                    admin["link_state"] = value
                else:
                    return 255, "", f'Error: argument "{value}" is wrong: {key}\n'
            vfs[number] = admin
        return 0, "", ""

    # -- the watch daemon and reset ----------------------------------------

    def _refused(self, what: str, error: OSError) -> None:
        with open(self.root / REFUSALS_LOG, "a", encoding="utf-8") as log:
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {what}: {error.strerror}\n")

    def poll(self) -> None:
        """One round of the watch daemon: react to every changed sriov_numvfs and every bind/unbind write."""
        with self.exclusive():
            self._poll()

    def _poll(self) -> None:
        for address in self.physical_functions():
            path = self.root / PCI_DEVICES / address / "sriov_numvfs"
            text = self._text(path)
            applied = len(self.virtfns(self.device(address)))
            if not text or text == str(applied):
                continue  # empty: a write in progress
            try:
                self.change_numvfs(address, text)
            except OSError as error:
                path.write_text(f"{applied}\n", encoding="utf-8")
                self._refused(f"{address} sriov_numvfs {text} (kept {applied})", error)
        drivers = self.root / PCI_DRIVERS
        for driver in sorted(drivers.iterdir()) if drivers.is_dir() else []:
            for operation in ("unbind", "bind"):
                path = driver / operation
                text = self._text(path)
                if not text:
                    continue
                path.write_text("", encoding="utf-8")  # cleared before acting: a waiter writes again only after
                try:
                    getattr(self, operation)(driver.name, text)
                except OSError as error:
                    self._refused(f"{driver.name}/{operation} {text}", error)

    def _watched_directories(self) -> list[Path]:
        """Where the writes the daemon reacts to land: each PF's directory (sriov_numvfs) and each driver's
        (bind, unbind)."""
        drivers = self.root / PCI_DRIVERS
        return [self.root / PCI_DEVICES / address for address in self.physical_functions()] + (
            sorted(drivers.iterdir()) if drivers.is_dir() else []
        )

    def watch(self, interval: float) -> None:
        """React to writes until killed: woken by inotify when a file in a watched directory was written (at
        least every IDLE_WAKE_S); without inotify, a round every `interval` seconds."""
        self.prepare()
        writes = _Writes.open(self._watched_directories())
        while True:
            self.poll()
            if writes is None:
                time.sleep(interval)
            else:
                writes.wait(IDLE_WAKE_S)

    def reset(self) -> None:
        """A fresh boot: no VFs, sriov_numvfs 0, no VF admin state, empty bind/unbind files."""
        with self.exclusive():
            self._reset()

    def _reset(self) -> None:
        for address in self.physical_functions():
            self._remove_vfs(address)
            (self.root / PCI_DEVICES / address / "sriov_numvfs").write_text("0\n", encoding="utf-8")
        (self.root / STATE_FILE).unlink(missing_ok=True)
        drivers = self.root / PCI_DRIVERS
        for driver in sorted(drivers.iterdir()) if drivers.is_dir() else []:
            for name in ("bind", "unbind"):
                (driver / name).write_text("", encoding="utf-8")


class _Writes:
    """An inotify descriptor watching directories for files closed after writing (Linux, through libc)."""

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor

    @classmethod
    def open(cls, directories: list[Path]) -> _Writes | None:
        """The watch, or None where inotify is not available (the caller polls instead)."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            descriptor = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if descriptor < 0:
            return None
        for directory in directories:
            if libc.inotify_add_watch(descriptor, os.fsencode(directory), IN_CLOSE_WRITE) < 0:
                os.close(descriptor)
                return None
        return cls(descriptor)

    def wait(self, timeout: float) -> None:
        """Until a watched write happened (since the last wait: the kernel queues them) or `timeout` passed."""
        readable = select.select([self.descriptor], [], [], timeout)[0]
        while readable:
            try:
                os.read(self.descriptor, 65536)
            except BlockingIOError:
                break


def _real_ip(args: list[str]) -> int:
    for candidate in REAL_IP:
        if os.access(candidate, os.X_OK):
            os.execv(candidate, [candidate, *args])
    print("simulated ip: no real ip binary to pass this to", file=sys.stderr)
    return 127


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="simulated_sriov", description="SIMULATED SR-IOV kernel (tests, lab)")
    commands = parser.add_subparsers(dest="command", required=True)
    watch = commands.add_parser("watch", help="react to writes in the tree until killed")
    watch.add_argument("--root", required=True)
    watch.add_argument("--interval", type=float, default=0.02, help="seconds between rounds without inotify")
    ip = commands.add_parser("ip", help="stand in for ip: ip --root R -- ARGS")
    ip.add_argument("--root", required=True)
    ip.add_argument("args", nargs=argparse.REMAINDER)
    reset = commands.add_parser("reset", help="no VFs and no VF state, as after a boot")
    reset.add_argument("--root", required=True)
    options = parser.parse_args(argv)
    kernel = Kernel(options.root)
    if options.command == "watch":
        kernel.watch(options.interval)
    elif options.command == "reset":
        kernel.reset()
    else:
        args = options.args[1:] if options.args[:1] == ["--"] else options.args
        answer = kernel.ip(args)
        if answer is None:
            return _real_ip(args)
        rc, out, err = answer
        sys.stdout.write(out)
        sys.stderr.write(err)
        return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
