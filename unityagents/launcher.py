"""Finding and starting an environment: a Unity build by the platform's rules, or a built-in scene.

A build is found as ML-Agents finds one (``3DBall`` names ``3DBall.x86_64``, ``3DBall.app``,
``3DBall.exe``, ...; the modern protocol's rules also accept the file itself and a folder of a
Windows build) and launched with its protocol's arguments. When no build matches, a built-in scene
of ``academy`` of that name runs in a Python process. Nothing here speaks a protocol: the
communicator listens before the launch, and the environment waits for the connection.
"""
from __future__ import annotations

import errno
import logging
import os
import platform
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

from unityagents.exception import UnityEnvironmentException, register_own_log

logger = logging.getLogger("unityagents")

_UNITY_EXTENSIONS = (".app", ".exe", ".x86_64", ".x86")


def builtin_scenes() -> List[str]:
    """Names of the scenes shipped in ``academy`` (empty if the package is not importable)."""
    try:
        import academy
    except ImportError:
        return []
    return sorted(academy.SCENES)


def scene_aliases() -> Dict[str, str]:
    """Unity's scene names that differ from the built-in scenes' (``SoccerTwos`` -> ``Soccer``)."""
    try:
        import academy
    except ImportError:
        return {}
    return dict(academy.SCENE_ALIASES)


def _listdir(folder: str) -> List[str]:
    """The sorted entries of ``folder`` (none when it is not a readable folder)."""
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []



def find_unity_binary(file_name: str, protocol: str = "api2") -> Optional[str]:
    """The Unity build that ``file_name`` names, by the platform rules, or None.

    With ``protocol="grpc"`` the modern rules apply (ML-Agents' launch rules): on Linux the name itself is
    also accepted when it is a file, and on Windows any ``.exe`` in a folder of that name
    except the crash handler.
    """
    name = file_name.strip()
    for ext in _UNITY_EXTENSIONS:
        if name.endswith(ext):
            name = name[: -len(ext)]
    cwd = os.getcwd()
    system = platform.system()
    # Every candidate is an exact path: the name is never a glob pattern, so that '*' or
    # '[ab]' names only a file of that very name.
    if system == "Darwin":
        base = os.path.basename(os.path.normpath(name))
        folders = [os.path.join(cwd, name + ".app", "Contents", "MacOS"),
                   os.path.join(name + ".app", "Contents", "MacOS")]
        candidates = [os.path.join(f, base) for f in folders]
        if protocol == "grpc":  # the modern rules: any file in the bundle's MacOS folder
            candidates += [os.path.join(f, e) for f in folders for e in _listdir(f)]
    elif system == "Windows":
        candidates = [os.path.join(cwd, name + ".exe"), name + ".exe"]
        if protocol == "grpc":
            folder = os.path.join(cwd, name)
            candidates += [os.path.join(folder, e) for e in _listdir(folder)
                           if e.endswith(".exe") and not e.startswith("UnityCrashHandler")]
    else:
        candidates = [os.path.join(cwd, name + ".x86_64"), os.path.join(cwd, name + ".x86"),
                      name + ".x86_64", name + ".x86"]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    if protocol == "grpc" and system not in ("Darwin", "Windows") and os.path.isfile(file_name.strip()) \
            and os.access(file_name.strip(), os.X_OK):
        return file_name.strip()
    return None


#: What a modern ML-Agents player ships in its data folder and a 2018 one does not: the gRPC
#: runtime (managed ``Grpc.Core.dll``, native ``grpc_csharp_ext``) and the ``Unity.ML-Agents``
#: assemblies of the C# package (a 2018 build compiles its ML-Agents scripts into
#: ``Assembly-CSharp.dll``).
_MODERN_MARKERS = ("grpc", "unity.ml-agents")


def _data_folders(binary: str) -> List[str]:
    """Where a player's data lives: ``<name>_Data`` beside it (Linux, Windows) or the bundle's ``Resources/Data``."""
    root, _ = os.path.splitext(binary)
    folders = [root + "_Data"]
    parts = os.path.normpath(binary).split(os.sep)
    if "Contents" in parts:  # macOS: <name>.app/Contents/MacOS/<name>
        contents = os.sep.join(parts[:len(parts) - 1 - parts[::-1].index("Contents")])
        folders.append(os.path.join(contents, "Resources", "Data"))
    folders += [os.path.join(os.path.dirname(binary), e) for e in _listdir(os.path.dirname(binary) or ".")
                if e.endswith("_Data")]
    return folders


def build_protocol(binary: str) -> Optional[str]:
    """The protocol a Unity build speaks, told from the files of its data folder: ``"grpc"`` when it
    ships the gRPC runtime or the ML-Agents package's assemblies, ``"api2"`` when its data folder has
    neither, None when no data folder is found."""
    found = False
    for folder in _data_folders(binary):
        if not os.path.isdir(folder):
            continue
        found = True
        for _, _, files in _walk(folder, depth=3):
            if any(f.lower().startswith(_MODERN_MARKERS) or "grpc" in f.lower() for f in files):
                return "grpc"
    return "api2" if found else None


def _walk(folder: str, depth: int):
    """``os.walk`` down to ``depth`` folders below ``folder`` (a data folder's assemblies sit at most
    in ``Managed``, ``Plugins/<arch>``)."""
    base = folder.rstrip(os.sep).count(os.sep)
    for here, dirs, files in os.walk(folder):
        if here.count(os.sep) - base >= depth:
            dirs[:] = []
        yield here, dirs, files


def choose_protocol(file_name: Optional[str], protocol: Optional[str], side_channels: Sequence[object] = (),
                    num_areas: int = 1) -> str:
    """The protocol to speak with ``file_name`` when the caller named none (``protocol=None``).

    Side channels and ``num_areas`` exist only in the modern protocol; a Unity build speaks what its
    files say (``build_protocol``); a built-in scene speaks both, and API-2 unless one of the former
    asks for the modern one.
    """
    if protocol is not None:
        return protocol
    if side_channels or num_areas != 1:
        return "grpc"
    binary = find_unity_binary(file_name, "grpc") if file_name else None
    if binary is not None:
        told = build_protocol(binary)
        if told is None:
            logger.warning("Could not tell which protocol the Unity build %s speaks (no data folder found "
                           "beside it); assuming API-2. Pass protocol='grpc' for a modern build.", binary)
        return told or "api2"
    return "api2"


def launch(file_name: str, protocol: str, port: int, worker_id: int, seed: Optional[int], log_dir: Optional[str],
           no_graphics: bool, env_args: Sequence[str]) -> Tuple[subprocess.Popen, str]:
    """Start the build or built-in scene ``file_name`` for ``protocol`` on ``port``; return its process and log path.

    A Unity build gets the arguments of its protocol's launch rules (API-2: ``--port``; gRPC: the graphics
    flags, ``--mlagents-port`` and ``-logFile``, as ML-Agents launches a player), then ``env_args``. A
    built-in scene runs as ``python -m academy`` with its output in a fresh log opened without following
    links. Both start in their own session, so that Ctrl-C reaches the trainer, which saves first.
    """
    binary = find_unity_binary(file_name, protocol)
    grpc = protocol == "grpc"
    if log_dir is None:  # private to this environment: nobody else can plant a link in it
        log_dir = tempfile.mkdtemp(prefix=f"unityagents-worker{worker_id}-")
    log_dir = os.path.abspath(log_dir)
    if binary is not None:
        check_executable(binary)
        logger.info("Launching the Unity build %s on port %d (%s)", binary, port, protocol)
        if grpc:  # ML-Agents' launch rules: graphics flags, port, log file, then the caller's arguments
            os.makedirs(log_dir, exist_ok=True)
            log_path = os.path.join(log_dir, f"Player-{worker_id}.log")
            args = ["-nographics", "-batchmode"] if no_graphics else []
            args += ["--mlagents-port", str(port)]
            if not any(a.lower() == "-logfile" for a in env_args):
                args += ["-logFile", log_path]
                register_own_log(log_path)
            cmd = [binary] + args + list(env_args)
        else:
            log_path = os.path.join(os.getcwd(), "unity-environment.log")
            cmd = [binary, "--port", str(port)] + list(env_args)
        try:  # own session: Ctrl-C reaches the trainer, which saves, then closes the environment
            return subprocess.Popen(cmd, start_new_session=True), log_path
        except OSError as e:
            raise launch_error(binary, e) from None
    scenes = builtin_scenes()
    scene = os.path.basename(file_name.strip())
    scene = scene_aliases().get(scene, scene)
    if scene not in scenes:
        raise UnityEnvironmentException(
            f"Couldn't launch the {file_name!r} environment: no Unity build matches it "
            f"(looked for {file_name}.x86_64 / .x86 / .app / .exe) and it is not a built-in "
            f"scene. Built-in scenes: {', '.join(scenes) or '(academy is not installed)'}."
        )
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(log_dir, f"{scene}-worker{worker_id}.log")
    cmd = [sys.executable, "-m", "academy", scene]
    if grpc:  # the arguments a Unity player gets (ML-Agents' launch rules)
        cmd += (["-nographics", "-batchmode"] if no_graphics else []) + [
            "--mlagents-port", str(port), "-logFile", log_path]
    else:
        cmd += ["--port", str(port)]
    if seed is not None:
        cmd += ["--seed", str(int(seed))]
    cmd += list(env_args)
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["academy"].__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
    logger.info("Launching the built-in scene %s on port %d over %s (log: %s)", scene, port,
                protocol, log_path)
    # A fresh log, opened without following a symlink planted at its path (O_NOFOLLOW): a link
    # there is refused instead of overwriting its target. The scene appends to it too (-logFile).
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
                     | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP or os.path.islink(log_path):
            raise UnityEnvironmentException(
                f"Couldn't open the environment log {log_path}: it is a symbolic link (to "
                f"{os.readlink(log_path)!r}), which is never followed. Remove it, or give another "
                "log folder (log_dir).") from None
        raise UnityEnvironmentException(
            f"Couldn't open the environment log {log_path}: {e.strerror or e}. Give a writable "
            "log folder (log_dir).") from None
    register_own_log(log_path)
    with os.fdopen(fd, "ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True), log_path


def check_executable(binary: str) -> None:
    """Refuse, before launching, a build that cannot be executed, with what to do about it."""
    if not os.access(binary, os.X_OK):
        raise UnityEnvironmentException(
            f"Couldn't launch the Unity build {binary}: it is not executable. Make it executable "
            f"(chmod -R 755 {os.path.dirname(binary) or '.'}), or check that its file system is not "
            "mounted noexec.")

def launch_error(binary: str, e: OSError) -> UnityEnvironmentException:
    """What an ``OSError`` of ``Popen`` means for a Unity build, and what to do."""
    if isinstance(e, PermissionError):
        why = (f"permission denied. Make the build executable (chmod -R 755 "
               f"{os.path.dirname(binary) or '.'}), or check that its file system is not mounted noexec")
    elif e.errno == errno.ENOEXEC:
        why = ("it is not a program this system can run (exec format error). Use the build for this "
               f"platform ({platform.system()} {platform.machine()}), or add a '#!' line if it is a script")
    elif e.errno == errno.ENOENT:
        why = ("the file or its interpreter does not exist (a '#!' line naming a missing program is a "
               "bad interpreter). Fix the script's first line, or rebuild for this platform")
    else:
        why = f"{e.strerror or e}"
    return UnityEnvironmentException(f"Couldn't launch the Unity build {binary}: {why}.")
