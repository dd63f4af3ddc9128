"""Environments on a Ray cluster: each one a Ray actor on some node, driven from the trainer.

The second backend of ``EnvironmentSet`` (the first is ``UnityEnvironment`` in this process).
An ``EnvironmentActor`` runs on a cluster node and owns a ``UnityEnvironment`` there: it launches
the built-in scene or the Unity build *on its own node* and talks to it over that node's
loopback, exactly as the local backend does. The trainer (the Ray driver) holds one
``RayEnvironmentWorker`` per environment, which has the ``EnvironmentWorker`` interface: its
``step_send`` starts the actor's step and ``receive`` waits for it, so the set sends to every
actor before collecting any and inference stays batched in the driver (PPO stays on-policy).

Placement: each actor asks for one CPU (so a node gets at most one environment per CPU) and the
actors are spread over the nodes; ``resource`` adds a custom resource to the request, so that
environments land only on the machines that declare it (those that have the build).

Faults: a dead actor or a lost node surfaces as ``UnityCommunicationException`` and an actor that
does not answer as ``UnityTimeOutException``; ``EnvironmentSet`` restarts it under the same
``RestartPolicy`` as a local crash, and Ray places the new actor on a node that is still there.

Ray is optional: ``pip install 'unity-tf-trainer[ray]'``. Nothing here imports it until ``connect`` is called.
"""
from __future__ import annotations

import logging
import os
import socket
import tempfile
from typing import Any, Dict, List, Optional

from unityagents.base_env import BehaviorSpec, BehaviorSteps
from unityagents.brain import BrainParameters
from unityagents.distribution import install_hint
from unityagents.exception import (
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityException,
    UnityTimeOutException,
)

logger = logging.getLogger("unityagents")

#: Seconds the driver waits for an actor beyond the environment's own timeout (Ray's own latency).
_MARGIN_S = 30.0


def _ray():
    try:
        import ray
    except ImportError:
        raise UnityEnvironmentException(
            f"--ray-address needs Ray, which is not installed. Install it with {install_hint('ray')}, or "
            "pip install 'ray>=2.40'; or train without --ray-address.") from None
    return ray


def connect(address: str) -> Dict[str, Any]:
    """Join the Ray cluster at ``address`` as its driver; return ``ray.cluster_resources()``.

    ``auto``: the running cluster found the usual Ray way (``RAY_ADDRESS``, or the one started on
    this machine with ``ray start``); ``local``: start a private single-node cluster on this
    machine, bound to 127.0.0.1; anything else: a cluster address such as ``10.0.0.5:6379``.
    """
    if address == "local":
        # Before Ray is imported: keep every process of the private cluster on loopback.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray = _ray()
    if ray.is_initialized():
        return ray.cluster_resources()
    try:
        if address == "local":
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, _node_ip_address="127.0.0.1",
                     logging_level=logging.WARNING)
        else:
            ray.init(address=address, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UnityEnvironmentException(
            f"Could not join the Ray cluster at --ray-address {address!r}: {e}. Start a cluster first "
            "(`ray start --head` on the head node; see docs/cluster.md), pass its address, or use "
            "--ray-address local for a private one on this machine.") from None
    resources = ray.cluster_resources()
    logger.info("Joined the Ray cluster at %s: %d node(s), %s CPU(s)", address,
                len([n for n in ray.nodes() if n.get("Alive")]), resources.get("CPU", 0))
    return resources


class EnvironmentActor:
    """Runs on a cluster node: one ``UnityEnvironment`` there, launched and reached over loopback."""

    def __init__(self) -> None:
        self.env = None

    def start(self, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """Launch the environment; return what the driver needs to know of it (and where it runs)."""
        import ray

        from unityagents.environment import UnityEnvironment

        log_dir = kwargs.get("log_dir")
        if log_dir:
            try:
                os.makedirs(log_dir, exist_ok=True)
            except OSError:  # the driver's folder does not exist on this machine
                kwargs = dict(kwargs, log_dir=os.path.join(tempfile.gettempdir(), "unityagents-ray"))
        self.env = UnityEnvironment(**kwargs)
        env = self.env
        return {"brains": dict(env.brains),
                "external_brain_names": list(env.external_brain_names),
                "reset_parameters": env.reset_parameters, "academy_name": env.academy_name,
                "logfile_path": env.logfile_path, "resets_by_itself": env.resets_by_itself,
                "reports_last_observation": env.reports_last_observation, "protocol": env.protocol,
                "node_id": ray.get_runtime_context().get_node_id(),
                "host": socket.gethostname()}

    def reset(self, train_mode: bool, config: Optional[Dict[str, float]]):
        infos = self.env.reset_behaviors(train_mode=train_mode, config=config)
        return infos, self.env.global_done, self.env.stats

    def step(self, action: Any, memory: Any, value: Any):
        infos = self.env.step_behaviors(action=action, memory=memory, value=value)
        return infos, self.env.global_done, self.env.stats

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


class RayEnvironmentWorker:
    """The driver's handle on one ``EnvironmentActor``: the ``EnvironmentWorker`` interface.

    :param index: the environment's index in the set (for messages).
    :param env_kwargs: ``UnityEnvironment`` arguments, used on the actor's node.
    :param resource: a custom Ray resource the actor's node must have (None: any node).
    :param start_timeout: seconds to wait for the actor to be placed and its environment to start.
    """

    def __init__(self, index: int, env_kwargs: Dict[str, Any], resource: Optional[str] = None,
                 start_timeout: float = 120.0):
        ray = _ray()
        self.index = index
        self.protocol = env_kwargs.get("protocol")  # None until the actor's environment has chosen
        self._timeout = float(env_kwargs.get("timeout_wait", 30.0)) + _MARGIN_S
        self._pending = None
        self.global_done: Optional[bool] = None
        self.stats: Dict[str, List[Any]] = {}
        options: Dict[str, Any] = {"num_cpus": 1, "scheduling_strategy": "SPREAD", "max_restarts": 0}
        if resource:
            options["resources"] = {resource: 1}
        self.node_id = "?"
        self.logfile_path: Optional[str] = None
        self._actor = ray.remote(EnvironmentActor).options(**options).remote()
        try:
            info = self._get(self._actor.start.remote(dict(env_kwargs)), start_timeout,
                             "to be placed on a node and start its environment"
                             + (f" (is any node offering the resource {resource!r}?)" if resource else ""))
        except BaseException:
            ray.kill(self._actor)
            raise
        self.brains: Dict[str, BrainParameters] = info["brains"]
        self.external_brain_names: List[str] = info["external_brain_names"]
        self.reset_parameters: Dict[str, float] = info["reset_parameters"]
        self.academy_name: str = info["academy_name"]
        self.logfile_path = info["logfile_path"]
        self.resets_by_itself: bool = info["resets_by_itself"]
        self.reports_last_observation: bool = info["reports_last_observation"]
        self.protocol = info["protocol"]
        self.node_id, self.host = info["node_id"], info["host"]
        logger.info("Environment %d runs in a Ray actor on node %s (%s); its log there: %s", index, self.node_id,
                    self.host, self.logfile_path)

    def _get(self, ref, timeout: float, what: str):
        ray = _ray()
        where = f"environment {self.index} (Ray actor on node {self.node_id})"
        try:
            return ray.get(ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise UnityTimeOutException(
                f"The {where} took longer than {timeout:.0f} s {what}. Its node may be overloaded or "
                "unreachable; see `ray status` and the actor's logs (`ray logs`).", self.logfile_path) from None
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, UnityException):
                raise cause from None
            raise UnityCommunicationException(f"The {where} failed: {e}", self.logfile_path) from None
        except ray.exceptions.RayActorError as e:
            raise UnityCommunicationException(
                f"The {where} died ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no reason given'}); "
                "its node may have been lost.", self.logfile_path) from None

    def reset_send(self, train_mode: bool = True, config: Optional[Dict[str, float]] = None) -> None:
        self._pending = self._actor.reset.remote(train_mode, config)

    def step_send(self, action: Any = None, memory: Any = None, value: Any = None) -> None:
        self._pending = self._actor.step.remote(action, memory, value)

    @property
    def behavior_specs(self) -> Dict[str, BehaviorSpec]:
        return {name: params.behavior_spec for name, params in self.brains.items()}

    def receive(self) -> Dict[str, BehaviorSteps]:
        if self._pending is None:
            raise UnityEnvironmentException("receive() was called with no reset or step in flight.")
        ref, self._pending = self._pending, None
        infos, self.global_done, self.stats = self._get(ref, self._timeout, "to answer")
        return infos

    def close(self) -> None:
        """Close the environment on its node, then end the actor. Safe to call more than once."""
        if self._actor is None:
            return
        ray = _ray()
        actor, self._actor = self._actor, None
        try:
            ray.get(actor.close.remote(), timeout=15)
        except Exception:  # a dead actor cannot close; its environment exits when the connection drops
            logger.debug("closing environment %d's actor raised", self.index, exc_info=True)
        ray.kill(actor)
