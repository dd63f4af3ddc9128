"""A built-in scene served in this process over gRPC, as a modern Unity build serves it.

The academy's modern Unity stand-in (``ModernUnity``, its gRPC client in a thread) serves the scene
to the trainer's gRPC server (``GrpcCommunicator``), so a test reads what the trainer decodes from
the scene's real messages. A test may edit the sensor templates the scene sends (``tamper`` before
the handshake, ``templates`` after it) to see what the trainer makes of a message unlike its spec.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Tuple

import pytest

from academy import load_scene
from academy.academy import Academy
from academy.grpc_communicator import GrpcClient, ModernUnity
from tests.conftest import free_port
from unityagents.exception import UnityObservationException
from unityagents.wire.base import Handshake, Peer
from unityagents.wire.grpc import GrpcCommunicator


class Served:
    """``scene`` behind the academy's gRPC client (a thread), connected to the trainer's server.

    :param tamper: called with the first brain's sensor templates before the scene starts.
    ``replies`` records every message the scene sent; use it as a context manager, which closes both ends.
    """

    def __init__(self, scene: str, tamper: Optional[Callable[[List[Any]], None]] = None):
        port = free_port()
        self.comm = GrpcCommunicator(Peer(20.0), port, 0, seed=0)
        self.academy = Academy(load_scene(scene)(0))
        self.unity = ModernUnity(self.academy, GrpcClient(port))
        #: The first brain's sensor templates, which every message of the scene copies.
        self.templates = self.unity._templates(self.unity.brains[0])
        self.replies: List[Any] = []
        self.hello: Optional[Handshake] = None
        exchange = self.unity.client.exchange

        def recorded(message):
            self.replies.append(exchange(message))
            return self.replies[-1]

        self.unity.client.exchange = recorded
        if tamper is not None:
            tamper(self.templates)
        self.thread = threading.Thread(target=self.unity.run, daemon=True)
        self.thread.start()
        self.comm.connect(20.0, scene)

    def handshake(self) -> Handshake:
        self.hello = self.comm.handshake()
        return self.hello

    def wire_sensors(self, brain: str) -> List[Tuple[str, Tuple[int, ...]]]:
        """(name, shape) of each sensor as the academy's messages declare it ([C,H,W] cameras)."""
        runtime = next(b for b in self.unity.brains if self.unity.names[b.name] == brain)
        return [(t.name, tuple(t.shape)) for t in self.unity._templates(runtime)]

    def refused_step(self, behavior: str) -> str:
        """Step ``behaviour``'s agents once (every action zero, after the handshake); the message of
        the ``UnityObservationException`` that the trainer's decoding of the answer must raise."""
        decisions, _ = self.hello.first_infos[behavior]
        actions = self.hello.brains[behavior].behavior_spec.action_spec.empty_action(len(decisions))
        self.comm.send_step({behavior: actions}, {}, {})
        with pytest.raises(UnityObservationException) as caught:
            self.comm.receive()
        return str(caught.value)

    def close(self) -> None:
        self.comm.close()
        self.thread.join(10.0)

    def __enter__(self) -> "Served":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
