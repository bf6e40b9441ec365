"""What the client and the worker share: where the socket lives and who may use it, what
makes a worker stale, the framing of messages, and ``worker status`` / ``worker stop``.

Only light standard-library modules are imported here (no torch, SymPy, Typer, Rich or
NumPy, nor ``socket``, ``dataclasses`` or ``typing``, which take milliseconds of their own):
the client imports this before it knows whether it must run in-process.
"""

from __future__ import annotations

import _socket
import json
import os
import stat
import struct
import sys
import time
import zlib

import autogradcli

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

OFF = "AUTOGRAD_CLI_NO_WORKER"  # set (not "" or "0"): every command runs in-process
IDLE = "AUTOGRAD_CLI_WORKER_IDLE"  # seconds without a question before the worker exits
HANG = "AUTOGRAD_CLI_WORKER_HANG"  # seconds without progress before the client gives up
IDLE_SECONDS = 300.0
HANG_SECONDS = 20.0
PACKAGE = os.path.dirname(os.path.abspath(autogradcli.__file__))

# Environment variables read when a process starts (the interpreter, OpenMP, MKL, torch,
# SymPy, the locale): a worker started under other values cannot stand in for this process.
STARTUP = (
    "PYTHON",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "GOTO",
    "NUMEXPR",
    "TORCH",
    "PYTORCH",
    "CUDA",
    "CUBLAS",
    "NVIDIA",
    "LD_",
    "SYMPY",
    "MPMATH",
    "LC_",
    "LANG",
    "TMPDIR",
    "TEMP",
    "TMP",
)

# Of those, the ones that change nothing a command prints (bytecode files, buffering: the
# worker copies the client's streams) are left out.
HARMLESS = frozenset(
    {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONPYCACHEPREFIX", "PYTHONSTARTUP"}
)
# The interpreter flags that can change what a command does or prints.
FLAGS = (
    "debug",
    "optimize",
    "no_user_site",
    "no_site",
    "ignore_environment",
    "verbose",
    "bytes_warning",
    "hash_randomization",
    "isolated",
    "dev_mode",
    "utf8_mode",
    "warn_default_encoding",
    "int_max_str_digits",
)

FRAME = struct.Struct("!cI")  # kind (one byte), payload length
MAX_FRAME = 1 << 24
CHUNK = 1 << 20  # output is sent in frames of at most this many bytes


def seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """A positive number of seconds from the environment, else ``default``."""
    try:
        value = float(env.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 and value == value and value != float("inf") else default


def disabled(env: Mapping[str, str]) -> bool:
    """Whether ``AUTOGRAD_CLI_NO_WORKER`` turns the worker off."""
    return env.get(OFF, "") not in ("", "0")


def supported() -> bool:
    """Unix sockets and a way to learn a peer's uid (Linux, the BSDs, macOS)."""
    return os.name == "posix" and hasattr(_socket, "AF_UNIX")


class Place:
    """The files of this installation's worker, in the user's private directory."""

    __slots__ = ("folder", "lock", "log", "socket")

    def __init__(self, folder: str, socket: str, lock: str, log: str) -> None:
        self.folder, self.socket, self.lock, self.log = folder, socket, lock, log


def _private(path: str, uid: int) -> bool:
    """A real directory (not a link) owned by ``uid`` that no one else may open."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == uid and info.st_mode & 0o077 == 0


def _temporary(env: Mapping[str, str]) -> str:
    """The temporary directory, as ``tempfile.gettempdir`` looks for it first."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        if os.path.isabs(env.get(name, "")) and os.path.isdir(env[name]):
            return env[name]
    return "/tmp"


def folder(env: Mapping[str, str], create: bool = False) -> str | None:
    """``$XDG_RUNTIME_DIR/autograd-cli``, else ``autograd-cli-UID`` in the temporary
    directory; None unless it is this user's and mode 0700 (made so when ``create``)."""
    uid = os.getuid()
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and _private(runtime, uid):
        path = os.path.join(runtime, "autograd-cli")
    else:
        path = os.path.join(_temporary(env), f"autograd-cli-{uid}")
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    return path if _private(path, uid) else None


def install_key() -> str:
    """One name per interpreter and copy of the package: two virtual environments (or two
    checkouts) never share a worker."""
    key = "\0".join((sys.prefix, sys.executable, PACKAGE, sys.version))
    return f"w{zlib.crc32(key.encode()):08x}"


def place(env: Mapping[str, str], create: bool = False) -> Place | None:
    """This installation's worker files; None where there is no private directory or the
    socket's path would be too long for ``AF_UNIX``."""
    where = folder(env, create)
    if where is None:
        return None
    base = os.path.join(where, install_key())
    if len(os.fsencode(base + ".sock")) >= 100:
        return None
    return Place(where, base + ".sock", base + ".lock", base + ".log")


def stamp() -> str:
    """What the installed package is: its version, its source files (count, sizes, times)
    and the time of each site-packages directory (an install there changes it)."""
    count = size = total = 0
    for root, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                try:
                    info = os.stat(os.path.join(root, name))
                except OSError:
                    continue
                count, size, total = count + 1, size + info.st_size, total + info.st_mtime_ns
    times = []
    for path in sys.path[1:]:
        if path.endswith(("site-packages", "dist-packages")):
            try:  # noqa: SIM105 (contextlib: milliseconds of the client's start)
                times.append(os.stat(path).st_mtime_ns)
            except OSError:
                pass
    return f"{autogradcli.__version__}:{count}:{size}:{total}:{times}"


def fingerprint(env: Mapping[str, str]) -> str:
    """What a process is fixed to when it starts: the interpreter, its flags and path, and
    the environment variables of ``STARTUP``. A worker answers only clients that match."""
    startup = sorted((k, v) for k, v in env.items() if k.startswith(STARTUP) and k not in HARMLESS)
    xoptions = sorted((k, str(v)) for k, v in sys._xoptions.items())
    flags = [f"{name}={getattr(sys.flags, name)}" for name in FLAGS]
    return json.dumps(
        [sys.executable, sys.version, flags, sys.warnoptions, xoptions, sys.path[1:], startup]
    )


# --- who is at the other end ---------------------------------------------------------------


def peer_uid(sock: _socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (``SO_PEERCRED`` on Linux,
    ``getpeereid`` elsewhere); None where neither is available."""
    if hasattr(_socket, "SO_PEERCRED"):
        size = struct.calcsize("3i")
        _pid, uid, _gid = struct.unpack(
            "3i", sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, size)
        )
        return uid
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
        if libc.getpeereid(sock.fileno(), ctypes.byref(uid), ctypes.byref(gid)) != 0:
            return None
        return int(uid.value)
    except (OSError, AttributeError):
        return None


def peer_allowed(sock: _socket.socket, uid: int | None = None) -> bool:
    """Whether the peer runs as ``uid`` (default: this process's user)."""
    try:
        peer = peer_uid(sock)
    except OSError:
        return False
    return peer is not None and peer == (os.getuid() if uid is None else uid)


def connect(path: str, timeout: float = 2.0) -> _socket.socket | None:
    """A connection to the worker at ``path`` run by this user, else None."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    if not peer_allowed(sock):
        sock.close()
        return None
    return sock


# --- framing ---------------------------------------------------------------------------------


def send(sock: _socket.socket, kind: bytes, payload: bytes = b"") -> None:
    """One frame: a kind byte, the payload's length, the payload."""
    sock.sendall(FRAME.pack(kind, len(payload)) + payload)


def send_json(sock: _socket.socket, message: dict[str, Any]) -> None:
    """A control message (kind ``J``)."""
    send(sock, b"J", json.dumps(message).encode())


def _exactly(sock: _socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = sock.recv(min(left, CHUNK))
        if not part:
            raise EOFError("the other end closed the connection")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def receive(sock: _socket.socket) -> tuple[bytes, bytes]:
    """The next frame's kind and payload (``EOFError`` when the other end has gone)."""
    kind, size = FRAME.unpack(_exactly(sock, FRAME.size))
    if size > MAX_FRAME:
        raise ConnectionError(f"a frame of {size} bytes")
    return kind, _exactly(sock, size)


def ask(place_: Place, message: dict[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
    """One control question (``status``, ``stop``) and its answer; None: no worker."""
    sock = connect(place_.socket, timeout)
    if sock is None:
        return None
    try:
        send_json(sock, message)
        kind, payload = receive(sock)
        return json.loads(payload) if kind == b"J" else None
    except (OSError, EOFError, ValueError):
        return None
    finally:
        sock.close()


# --- worker status / worker stop ----------------------------------------------------------------

ACTIONS = ("status", "stop")


def _when(epoch: float) -> str:
    ago = max(0, int(time.time() - epoch))
    spent = f"{ago} s" if ago < 120 else f"{ago // 60} min"
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(epoch))} ({spent} ago)"


def control(action: str, env: Mapping[str, str], echo: Callable[[str], None]) -> int:
    """``autograd-cli worker status`` or ``worker stop``: what it prints (through ``echo``,
    one line a call) and its exit code (0)."""
    if not supported():
        echo("worker: not available here (no Unix sockets); every command runs in-process")
        return 0
    where = place(env)
    answer = None if where is None else ask(where, {"op": action})
    off = f" ({OFF} is set: commands run in-process)" if disabled(env) else ""
    if answer is None:
        echo(f"worker: not running{off}")
        return 0
    if action == "stop":
        for _ in range(100):  # it removes its socket as it goes
            if not os.path.exists(where.socket):  # type: ignore[union-attr]
                break
            time.sleep(0.05)
        echo(f"worker: stopped (pid {answer['pid']}, {answer['questions']} questions answered)")
        return 0
    echo(f"worker: running{off}, pid {answer['pid']}, since {_when(answer['started'])}")
    echo(
        f"memory: {answer['rss'] / 2**20:.0f} MB resident (each question runs in a process "
        "forked from it, sharing that memory; one such process waits, warmed up, for the "
        "next question)"
    )
    echo(f"questions answered: {answer['questions']} ({answer['running']} running now)")
    echo(
        f"exits after {answer['idle']:g} s without a question, when autograd-cli's files "
        "change, or on `autograd-cli worker stop`"
    )
    echo(f"socket: {where.socket}")  # type: ignore[union-attr]
    return 0
