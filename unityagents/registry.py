"""Environments by name: ``default_registry["3DBall"].make()`` (mlagents_envs' ``registry``).

``mlagents_envs.registry`` -> ``unityagents.registry``. ``default_registry`` hands out the
built-in scenes under the names of Unity's example projects (``3DBall``, ``Basic``, ``PushBlock``,
``SoccerTwos``, ...; a scene Unity has no example for keeps its own name), offline: ``make()``
starts the scene in a Python process, speaking the modern protocol as a Unity build of those
examples does. A user's own builds join with ``register`` or ``register_from_yaml``.

Each entry's ``expected_reward`` is what the built-in version of the scene scores when solved,
measured with its scripted policy (``python -m academy <scene> --episodes 20 --seed 0``, the mean
episode reward of each brain); its description says so. The scenes are simplified versions of
Unity's, so the figures are not those of Unity's builds.
"""
from __future__ import annotations

import abc
import difflib
import os
from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, Optional

from unityagents.base_env import BaseEnv
from unityagents.exception import UnityEnvironmentException

__all__ = ["BaseRegistryEntry", "BuiltInSceneEntry", "LocalRegistryEntry", "UnityEnvRegistry", "default_registry"]


class BaseRegistryEntry(abc.ABC):
    """One environment a registry hands out.

    :param identifier: its name in the registry.
    :param expected_reward: the cumulative reward per episode that counts as solving it (None: unknown).
    :param description: what it is: its behaviours, observations, actions and reward.
    """

    def __init__(self, identifier: str, expected_reward: Optional[float], description: Optional[str]):
        self._identifier = identifier
        self._expected_reward = expected_reward
        self._description = description

    @property
    def identifier(self) -> str:
        return self._identifier

    @property
    def expected_reward(self) -> Optional[float]:
        return self._expected_reward

    @property
    def description(self) -> Optional[str]:
        return self._description

    @abc.abstractmethod
    def make(self, **kwargs: Any) -> BaseEnv:
        """A new environment; ``kwargs`` go to ``UnityEnvironment`` (all but ``file_name``)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._identifier!r}, expected_reward={self._expected_reward!r})"


def _environment(file_name: str, extra_args: Optional[List[str]], kwargs: Dict[str, Any]) -> BaseEnv:
    from unityagents.environment import UnityEnvironment

    kwargs = dict(kwargs)
    kwargs.pop("file_name", None)
    args = list(kwargs.pop("additional_args", None) or ()) + list(extra_args or ())
    if args:
        kwargs["additional_args"] = args
    return UnityEnvironment(file_name=file_name, **kwargs)


class BuiltInSceneEntry(BaseRegistryEntry):
    """A built-in scene (``academy``), started in its own Python process by ``make()``.

    :param scene: the scene's name (``python -m academy <scene>``).
    Unless ``make`` is given a ``protocol``, the scene speaks the modern protocol (gRPC), as the
    Unity builds that scripts written for mlagents_envs expect.
    """

    def __init__(self, identifier: str, expected_reward: Optional[float], description: Optional[str], scene: str):
        super().__init__(identifier, expected_reward, description)
        self.scene = scene

    def make(self, **kwargs: Any) -> BaseEnv:
        kwargs.setdefault("protocol", "grpc")
        return _environment(self.scene, None, kwargs)


class LocalRegistryEntry(BaseRegistryEntry):
    """A build on this machine (or a built-in scene), registered from a YAML file or by a script.

    :param file_name: the build (``builds/MyScene.x86_64``; a relative path is read from the folder of
        the YAML file that named it) or a built-in scene's name.
    :param additional_args: command-line arguments appended to those ``make`` is given.
    """

    def __init__(self, identifier: str, expected_reward: Optional[float], description: Optional[str],
                 file_name: str, additional_args: Optional[List[str]] = None):
        super().__init__(identifier, expected_reward, description)
        self.file_name = file_name
        self._additional_args = list(additional_args or ())

    def make(self, **kwargs: Any) -> BaseEnv:
        return _environment(self.file_name, self._additional_args, kwargs)


class UnityEnvRegistry(Mapping):
    """A read-only mapping of identifiers to entries: ``registry[name].make()`` starts one.

    ``register`` adds (or replaces) an entry; ``register_from_yaml`` adds the entries of a YAML
    file when the registry is next read; ``clear`` empties it.
    """

    def __init__(self) -> None:
        self._REGISTERED_ENVS: Dict[str, BaseRegistryEntry] = {}
        self._manifests: List[str] = []

    def register(self, new_entry: BaseRegistryEntry) -> None:
        """Add ``new_entry`` under its identifier; a later entry with the same identifier replaces it."""
        if not isinstance(new_entry, BaseRegistryEntry):
            raise UnityEnvironmentException(
                f"register takes a BaseRegistryEntry (e.g. LocalRegistryEntry(identifier, expected_reward, "
                f"description, file_name)); got {type(new_entry).__name__} {new_entry!r}.")
        self._REGISTERED_ENVS[new_entry.identifier] = new_entry

    def register_from_yaml(self, path_to_yaml: str) -> None:
        """Add the environments a YAML file lists, when the registry is next read.

        The file (mlagents_envs' manifest layout, with ``file_name`` for a build on this machine)::

            environments:
              - MyScene:
                  expected_reward: 0.9
                  description: what the agents see, do and are rewarded for
                  file_name: builds/MyScene.x86_64     # relative to this file's folder
                  additional_args: ["-screen-width", "84"]

        Builds are not downloaded: an entry with only ``linux_url``/``darwin_url``/``win_url`` is
        refused when read, with the URL to download and unzip yourself.
        """
        if str(path_to_yaml).startswith(("http://", "https://")):
            raise UnityEnvironmentException(
                f"register_from_yaml reads a file on this machine; {path_to_yaml} is a URL. Download it and pass its "
                "path (this package downloads nothing).")
        self._manifests.append(os.fspath(path_to_yaml))

    def _load_all_manifests(self) -> None:
        while self._manifests:
            path = self._manifests.pop(0)
            for entry in _read_manifest(path):
                self.register(entry)

    def clear(self) -> None:
        """Remove every entry (and the YAML files not read yet)."""
        self._REGISTERED_ENVS.clear()
        self._manifests = []

    def __getitem__(self, identifier: str) -> BaseRegistryEntry:
        self._load_all_manifests()
        try:
            return self._REGISTERED_ENVS[identifier]
        except KeyError:
            names = sorted(self._REGISTERED_ENVS)
            close = difflib.get_close_matches(str(identifier), names, n=1, cutoff=0.5) or [
                n for n in names if n.lower() == str(identifier).lower()]
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise KeyError(f"The entry {identifier!r} is not present in the registry.{hint} Its entries are: "
                           f"{', '.join(names) or '(none)'}.") from None

    def __len__(self) -> int:
        self._load_all_manifests()
        return len(self._REGISTERED_ENVS)

    def __iter__(self) -> Iterator[str]:
        self._load_all_manifests()
        return iter(list(self._REGISTERED_ENVS))


def _read_manifest(path: str) -> List[BaseRegistryEntry]:
    import yaml

    try:
        with open(path) as f:
            manifest = yaml.safe_load(f)
    except OSError as e:
        raise UnityEnvironmentException(f"The registry file {path} cannot be read: {e}.") from None
    listed = manifest.get("environments") if isinstance(manifest, dict) else None
    if not isinstance(listed, list):
        raise UnityEnvironmentException(
            f"The registry file {path} needs a list under 'environments' (each item {{identifier: {{expected_reward, "
            f"description, file_name}}}}); found {type(listed).__name__ if listed is not None else 'no such key'}.")
    folder = os.path.dirname(os.path.abspath(path))
    entries: List[BaseRegistryEntry] = []
    for item in listed:
        if not isinstance(item, dict) or len(item) != 1 or not isinstance(next(iter(item.values())), dict):
            raise UnityEnvironmentException(
                f"The registry file {path}: each item of 'environments' is one identifier mapping to its settings "
                f"(expected_reward, description, file_name); found {item!r}.")
        (identifier, settings), = item.items()
        unknown = sorted(set(settings) - {"expected_reward", "description", "file_name", "additional_args",
                                          "linux_url", "darwin_url", "win_url", "tmp_dir"})
        if unknown:
            raise UnityEnvironmentException(
                f"The registry file {path}: entry {identifier!r} has the unknown keys {unknown}; the keys are "
                "expected_reward, description, file_name, additional_args (and mlagents_envs' *_url keys).")
        file_name = settings.get("file_name")
        if file_name is None:
            urls = [settings[k] for k in ("linux_url", "darwin_url", "win_url") if settings.get(k)]
            raise UnityEnvironmentException(
                f"The registry file {path}: entry {identifier!r} names no file_name, only the download(s) "
                f"{urls or '(none)'}. This package downloads nothing: download and unzip the build, then give its "
                "path as file_name.")
        file_name = str(file_name)
        if not os.path.isabs(file_name) and os.path.exists(os.path.join(folder, file_name)):
            file_name = os.path.join(folder, file_name)
        entries.append(LocalRegistryEntry(str(identifier), settings.get("expected_reward"),
                                          settings.get("description"), file_name, settings.get("additional_args")))
    return entries


# --------------------------------------------------------------------------------- the built-in scenes
_MEASURED = "Expected reward: the built-in scene's scripted policy, mean of 20 episodes " \
            "(python -m academy {scene} --episodes 20 --seed 0)."

#: scene -> (expected reward, what it is). Rewards measured as ``_MEASURED`` says.
_BUILT_IN: Dict[str, Any] = {
    "3DBall": (100.0, "12 agents balance a ball on their platform. Behavior 3DBall: a vector observation of 8, "
                      "2 continuous actions."),
    "3DBallHard": (100.0, "3DBall with a vector observation of 5 that leaves out the ball's velocity: an agent "
                          "needs memory. Behavior 3DBallHard: 2 continuous actions."),
    "3DBallIL": (100.0, "3DBall with a scripted Teacher and a Student to train by imitation. Behavior Student: "
                        "a vector of 8, 2 continuous actions."),
    "Basic": (0.94, "One agent on a line between a small and a large goal. Behavior Basic: a one-hot position "
                    "(vector 20), one discrete branch of 2 moves."),
    "GridWorld": (0.97, "One agent in a grid reaches the goal and avoids the pit. Behavior GridWorld: a vector "
                        "of 2 and an 84x84 RGB camera ((3, 84, 84)), one discrete branch of 4."),
    "Hallway": (0.94, "8 agents read a cue and walk to the goal of the matching colour. Behavior Hallway: "
                      "vectors of 5 and 1, one discrete branch of 4; needs memory."),
    "Interact": (1.08, "8 agents walk to a button and press it. Behavior InteractBrain: a vector of 3, "
                       "2 continuous actions and one discrete branch of 2 (hybrid)."),
    "Tennis": (4.05, "Two rackets per court (8 courts) keep the ball in play. Behaviors Tennis?team=0 and "
                     "Tennis?team=1: a vector of 8, 2 continuous actions; trained by self-play."),
    "PushBlock": (0.86, "8 agents push a block onto the goal pad. Behavior PushBlock: a vector of 12, one "
                        "discrete branch of 5."),
    "Pyramids": (1.79, "16 agents find a switch that spawns a pyramid, then touch its gold brick (sparse "
                       "reward). Behavior Pyramids: vectors of 35 and 2, one discrete branch of 4."),
    "PushBlockCollab": (5.09, "16 groups of 3 agents push blocks onto a goal together, rewarded as a group. "
                              "Behavior PushBlockCollab: a vector of 11, one discrete branch of 3; group ids "
                              "and group rewards (MA-POCA)."),
    "SoccerTwos": (None, "8 fields of 2 v 2 soccer, a group per team. Behaviors SoccerTwos?team=0 and "
                         "SoccerTwos?team=1: a vector of 6, one discrete branch of 3; trained by self-play, so "
                         "no fixed reward marks it solved (ELO does)."),
    "Sorter": (0.94, "16 agents visit 1 to 5 numbered tiles in increasing order. Behavior Sorter: a "
                     "BufferSensor of up to 5 tiles ((5, 8)) and a vector of 7, one discrete branch of 4."),
    "SorterFlat": (0.94, "Sorter with the tiles padded and flattened into one vector of 40 (beside the vector "
                         "of 7): the baseline for Sorter's attention."),
}


def _built_in_entries() -> List[BaseRegistryEntry]:
    from unityagents.launcher import builtin_scenes, scene_aliases

    unity_name = {scene: alias for alias, scene in scene_aliases().items()}
    entries = []
    for scene in builtin_scenes():
        identifier = unity_name.get(scene, scene)
        reward, what = _BUILT_IN.get(identifier, (None, f"The built-in scene {scene}."))
        text = what + (" " + _MEASURED.format(scene=scene) if reward is not None else "")
        entries.append(BuiltInSceneEntry(identifier, reward, text, scene))
    return entries


default_registry = UnityEnvRegistry()
for _entry in _built_in_entries():
    default_registry.register(_entry)
del _entry
