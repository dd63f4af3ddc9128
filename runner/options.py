"""The run's options: one typed object that either front end builds from its command line.

``learn.py`` builds it from the seed's flags and per-brain YAML, ``unityagents-learn`` from a
Release 22 run config; what starts a run (``runner.run``) reads nothing else. The helpers here
are the parts both front ends share: the protocol's arguments, the shipped files, the ports.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

from runner.run_paths import RunPaths
from trainers.settings.schema import Param
from unityagents.exception import UnityEnvironmentException
from unityagents.vector.restart import RestartPolicy

logger = logging.getLogger("unityagents")

#: Where the shipped files sit: beside ``learn.py`` in a clone, and in an installed package too
#: (``runner/`` and ``learn.py`` are installed side by side).
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Beside learn.py in a clone; in an installed package under ``SHIPPED_DIR`` (setup.py's build_py).
SHIPPED = ("trainer_configurations.yaml", "config", "curricula")
SHIPPED_DIR = "unityagents_shipped"

#: The wire protocol, as both command lines declare it.
PROTOCOL = Param(str, required=True, choices=("api2", "grpc"),
                 fix="api2 talks to Unity builds of 2018 (ML-Agents 0.3), grpc to ML-Agents Release 19+.")


@dataclass(frozen=True)
class RunOptions:
    """One training (or inference) run, checked and typed, as a front end builds it once."""

    env: Optional[str]  # a build or built-in scene; None: the Unity Editor
    config: Any  # the run's trainer settings (runner.settings.trainer_config.TrainerConfig)
    # What is trained, and from where.
    run_path: str = "ppo"
    train: bool = False
    load: bool = False
    init_from: Optional[str] = None  # a checkpoint folder whose weights start the run
    lesson: int = 0
    #: A curriculum JSON path, or an object with ``Curriculum``'s interface (environment parameters).
    curriculum: Any = None
    seed: int = 0
    # Which files are kept.
    paths: Optional[RunPaths] = None  # None: models/<run_path>/ and summaries/
    keep_checkpoints: int = 5
    save_freq: int = 50000
    #: Also save each time a behaviour's agent steps pass a multiple of its interval: one for all, or one per
    #: behaviour (Release 22's ``checkpoint_interval``); None: ``save_freq`` only.
    checkpoint_interval: Union[None, int, Mapping[str, int]] = None
    #: Release 22's ``keep_checkpoints`` per behaviour: how many ``<Behavior>-<step>.onnx`` each keeps (the
    #: TensorFlow checkpoint of the whole run keeps ``keep_checkpoints``).
    keep_per_behavior: Optional[Mapping[str, int]] = None
    device: Optional[str] = None  # the graph's device: cpu, cuda, cuda:N (runner.devices); None: TensorFlow's choice
    strict_export: bool = False  # an .onnx that a Unity engine would refuse or warn about stops the run
    # The environments.
    worker_id: int = 0
    base_port: int = 5005
    timeout: int = 60
    slow: bool = False
    num_envs: int = 1
    schedule: str = "overlapped"  # unityagents.vector.overlapped_stepping.SCHEDULES
    env_args: List[str] = field(default_factory=list)
    protocol_options: Dict[str, Any] = field(default_factory=dict)
    restarts: Optional[RestartPolicy] = None
    ray_address: Optional[str] = None
    ray_resource: Optional[str] = None
    log_dir: Optional[str] = None  # the environments' logs; None: <checkpoints>/logs
    resume_command: Optional[str] = None  # how the user continues this run (said when the Editor leaves for good)

    def checkpoint_dir(self) -> str:
        return self.paths.checkpoint_dir if self.paths is not None else os.path.join("models", self.run_path)


def protocol_options(protocol: str, time_scale: float = 20.0, engine: Optional[Dict[str, int]] = None,
                     no_graphics: bool = False, num_areas: int = 1, no_graphics_monitor: bool = False
                     ) -> Dict[str, Any]:
    """``UnityEnvironment``'s protocol arguments; the engine settings exist in the modern protocol only.

    :param engine: the engine settings the user gave (``width``, ``quality_level``, ...), checked.
    :param num_areas: training areas per environment, asked for in the modern protocol's handshake.
    :param no_graphics_monitor: launch every environment but the first without graphics.
    """
    engine = dict(engine or {})
    if protocol == "api2":
        given = [f"--{k.replace('_', '-')}" for k in engine] + (["--no-graphics"] if no_graphics else []) + (
            ["--time-scale"] if time_scale != 20.0 else []) + (["--no-graphics-monitor"] if no_graphics_monitor else [])
        if num_areas != 1:
            raise UnityEnvironmentException(
                f"--num-areas {num_areas} travels in the modern protocol's handshake, which an API-2 build does not "
                "read. Use --protocol grpc (a modern build), or drop --num-areas.")
        if given:
            raise UnityEnvironmentException(
                f"{', '.join(given)} set the engine of a modern build and need --protocol grpc; an API-2 build has "
                "no engine settings (use --slow for its inference settings).")
        return {}
    from unityagents.wire.side_channels import EngineConfig

    extra = {"num_areas": int(num_areas)} if num_areas != 1 else {}
    if no_graphics_monitor:
        extra["no_graphics_monitor"] = True
    return {"protocol": "grpc", "engine_config": EngineConfig(time_scale=time_scale, **engine),
            "no_graphics": bool(no_graphics), **extra}


def shipped_file(path: str) -> str:
    """``path`` itself when it exists (or is absolute); else, for a relative path that names a shipped file
    (``trainer_configurations.yaml``, ``config/...``, ``curricula/...``), the copy shipped with the code, so
    the documented commands work from any folder, from a clone or an installed package alike."""
    if os.path.isabs(path) or os.path.exists(path):
        return path
    relative = os.path.normpath(path)
    if relative.split(os.sep)[0] not in SHIPPED:
        return path
    for base in (HERE, os.path.join(HERE, SHIPPED_DIR)):
        candidate = os.path.join(base, relative)
        if os.path.exists(candidate):
            logger.info("%s is not in this folder: using the shipped %s", path, candidate)
            return candidate
    return path


def check_ports(base_port: int, worker_id: int, num_envs: int) -> None:
    """Every environment's port (base port + worker id + i) must exist; refused before anything starts."""
    last_port = base_port + worker_id + num_envs - 1
    if last_port > 65535:
        raise UnityEnvironmentException(
            f"--base-port {base_port} + --worker-id {worker_id} + --num-envs {num_envs} needs ports up to "
            f"{last_port}, past 65535. Lower --base-port or --worker-id.")
