"""Where the run's graph runs: Release 22's ``--torch-device`` / ``torch_settings.device`` as TensorFlow placement.

Release 22 names a PyTorch device; this trainer builds one TensorFlow graph in one session, so the
name becomes the device its ops are placed on:

* ``cpu`` -> ``/CPU:0``, and the session sees no GPU at all (nothing is copied to one);
* ``cuda`` or ``gpu`` -> ``/GPU:0``; ``cuda:N`` or ``gpu:N`` -> ``/GPU:N``. Ops that have no GPU
  kernel stay on the CPU (soft placement), and the session takes GPU memory as it needs it rather
  than all of it up front;
* not given -> TensorFlow's own choice: the first GPU where the installed build sees one, else
  the CPU.

A GPU asked for and not visible to TensorFlow is refused before any environment is launched
(``Placement.check``): the message names the device asked for, the GPUs TensorFlow sees and
whether the installed build can use one at all (``tensorflow-cpu``, the default install on
x86-64, cannot: ``pip install 'unity-tf-trainer[gpu]'`` installs the GPU build).

The session's intra-op pool (the threads that split one op across cores) is one thread unless a
behaviour's minibatch step has ops large enough to pay for the split, and then a thread per core, or
half the cores where that step runs its branches side by side (``intra_op_threads``).
"""
from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from typing import Any, ContextManager, Iterable, Mapping, Optional, Sequence

from trainers.trainer.base import UnityTrainerException
from unityagents.brain import BrainParameters, camera_shape
from unityagents.distribution import install_hint

_NAME = re.compile(r"^(cpu|cuda|gpu)(?::(\d+))?$")


class DeviceError(UnityTrainerException):
    """The device asked for is not a device name, or not one this machine has."""


@dataclass(frozen=True)
class Placement:
    """The device the run's graph is placed on (``None``: TensorFlow's own choice).

    :param requested: the name as the user gave it (``torch_settings.device``), for messages.
    :param device: a TensorFlow device name (``/CPU:0``, ``/GPU:N``) or None.
    """

    requested: Optional[str] = None
    device: Optional[str] = None

    @classmethod
    def of(cls, name: Optional[str]) -> "Placement":
        """The placement of a Release 22 device name (``cpu``, ``cuda``, ``cuda:N``; ``gpu`` too), unchecked."""
        if name is None or str(name).strip() == "":
            return cls()
        m = _NAME.match(str(name).strip().lower())
        if m is None:
            raise DeviceError(
                f"torch_settings.device / --torch-device {name!r} is not a device this trainer knows: expected "
                "cpu, cuda or cuda:N (gpu and gpu:N are accepted too), or nothing for TensorFlow's own choice.")
        if m[1] == "cpu":
            if m[2] not in (None, "0"):
                raise DeviceError(f"torch_settings.device {name!r}: there is one CPU device; use cpu.")
            return cls(str(name), "/CPU:0")
        return cls(str(name), f"/GPU:{int(m[2] or 0)}")

    @property
    def gpu_index(self) -> Optional[int]:
        """The GPU asked for, or None (the CPU, or TensorFlow's choice)."""
        if self.device is None or not self.device.startswith("/GPU:"):
            return None
        return int(self.device.split(":")[1])

    def check(self, visible_gpus: Optional[Sequence[str]] = None,
              built_with_cuda: Optional[bool] = None) -> "Placement":
        """Refuse a GPU that TensorFlow does not see; ``self`` otherwise.

        :param visible_gpus: the GPUs TensorFlow sees (default: ``tf.config.list_physical_devices("GPU")``).
        :param built_with_cuda: whether the installed TensorFlow can use a GPU (default: asks it).
        """
        index = self.gpu_index
        if index is None:
            return self
        if visible_gpus is None or built_with_cuda is None:
            from trainers.tf_utils import tf

            if visible_gpus is None:
                visible_gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
            if built_with_cuda is None:
                built_with_cuda = bool(tf.test.is_built_with_cuda())
        if index < len(visible_gpus):
            return self
        sees = f"{len(visible_gpus)} GPU(s) ({', '.join(visible_gpus)})" if visible_gpus else "no GPU"
        if not built_with_cuda:
            why = ("the installed TensorFlow is a CPU-only build (tensorflow-cpu, the default install on x86-64): "
                   f"install the GPU build with {install_hint('gpu')} (Linux, NVIDIA driver)"
                   + (f"{_both_builds()}, or" if _both_builds() else ", or"))
        else:
            why = ("the installed TensorFlow can use GPUs: check that the NVIDIA driver works (nvidia-smi) and that "
                   "CUDA_VISIBLE_DEVICES does not hide the GPU, or")
        raise DeviceError(
            f"torch_settings.device / --torch-device {self.requested!r} asks for GPU {index} ({self.device}), but "
            f"TensorFlow sees {sees}: {why} train on the CPU with --torch-device cpu (or leave the device out).")

    def scope(self, graph: Any) -> ContextManager[Any]:
        """Builds the ops made inside it on this device (nothing when TensorFlow chooses)."""
        return graph.device(self.device) if self.device is not None else contextlib.nullcontext()

    def session_config(self, intra_op_threads: Optional[int] = None) -> Optional[Any]:
        """The ``tf.ConfigProto`` of the run's session, or None for TensorFlow's defaults.

        :param intra_op_threads: the size of the intra-op pool (``intra_op_threads``); None: TensorFlow's
            choice (a thread per core, or ``TF_NUM_INTRAOP_THREADS``).
        """
        if self.device is None and intra_op_threads is None:
            return None
        from trainers.tf_utils import tf

        if self.device is None:
            config = tf.ConfigProto()
        elif self.gpu_index is None:  # the CPU: the session does not see any GPU
            config = tf.ConfigProto(device_count={"GPU": 0})
        else:
            config = tf.ConfigProto(allow_soft_placement=True)
            config.gpu_options.allow_growth = True
        if intra_op_threads is not None:
            config.intra_op_parallelism_threads = intra_op_threads
        return config

    def describe(self) -> str:
        return "TensorFlow's choice" if self.device is None else f"{self.device} (asked: {self.requested})"


#: Multiply-adds of a minibatch step's largest layer (rows times inputs times outputs) from which its
#: ops are worth splitting across cores. Below it, the split's hand-offs cost more than they save, and
#: the pool's threads take the cores that acting, a ``threaded`` update and the scene need: one
#: thread steps a run measurably faster (``docs/benchmarks.md``, "The intra-op pool").
SPLIT_WORK = 1e8
#: Multiply-adds per input value of a camera's encoder (the ``simple`` encoder's first convolution:
#: about 1.2M for an 84x84 RGB image), for the same estimate.
CAMERA_WORK_PER_VALUE = 64


def minibatch_work(parameters: Mapping[str, Any], brain: Optional[BrainParameters] = None) -> float:
    """The multiply-adds of one minibatch step's largest layer, estimated from a behaviour's settings.

    ``batch_size`` rows through a ``hidden_units``-wide layer, or through the encoders of the
    ``brain``'s cameras, whichever is larger. A trainer without these settings counts 0.
    """
    rows = float(parameters.get("batch_size") or 0)
    hidden = float(parameters.get("hidden_units") or 0)
    cameras = brain.camera_resolutions if brain is not None else []
    values = sum(c * h * w for c, h, w in (camera_shape(camera) for camera in cameras))
    return rows * max(hidden * hidden, values * CAMERA_WORK_PER_VALUE)


def intra_op_threads(works: Iterable[float], side_by_side: Iterable[float] = ()) -> Optional[int]:
    """The session's intra-op pool for behaviours with these ``minibatch_work`` estimates.

    ``works`` are the behaviours whose minibatch step runs one op after another in the calling
    thread, ``side_by_side`` those whose step runs its independent branches on the inter-op pool
    (MA-POCA: ``update_inline`` off). 1 when every one is below ``SPLIT_WORK``; None (TensorFlow's
    choice, a thread per core) when one of ``works`` reaches it, or when ``TF_NUM_INTRAOP_THREADS``
    is set: TensorFlow reads that variable itself. When only steps of ``side_by_side`` reach it,
    half the cores: their branches already keep cores busy, each on an inter-op thread, and
    splitting every op over every core as well oversubscribes them (poca/SoccerTwos on two cores
    steps a sixth faster with one intra-op thread than with two). TensorFlow builds the pool once
    per process, from the first session's setting, so it holds for the run's session where that
    session is the process's first (as in a training run).
    """
    if os.environ.get("TF_NUM_INTRAOP_THREADS"):
        return None
    if any(work >= SPLIT_WORK for work in works):
        return None
    if any(work >= SPLIT_WORK for work in side_by_side):
        return max(1, _cores() // 2)
    return 1


def _cores() -> int:
    """The cores this process may run on (its affinity where the platform has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def _both_builds() -> str:
    """A hint when both TensorFlow builds are installed (they share one package folder: the one installed last wins)."""
    from importlib import metadata

    try:
        gpu, cpu = metadata.version("tensorflow"), metadata.version("tensorflow-cpu")
    except metadata.PackageNotFoundError:
        return ""
    return (f"; tensorflow {gpu} and tensorflow-cpu {cpu} are both installed and the CPU build's files are the ones "
            f"in place: `pip uninstall -y tensorflow-cpu` then `pip install --force-reinstall --no-deps "
            f"tensorflow=={gpu}`")


def placement(device: Any) -> Placement:
    """A ``Placement`` as given, or the checked placement of a device name (None: TensorFlow's choice)."""
    return device if isinstance(device, Placement) else Placement.of(device).check()
