"""Hierarchical wall-clock timers for a run, written as ``timers.json`` (the shape ML-Agents users know).

Why: a slow run is only fixable once one knows where its time goes (stepping the environment,
waiting on it, inference, the buffer, the update, summaries, checkpoints, the export). A timer is
a named node under whatever timer is open when it starts, so the same name under two parents is
two nodes, and each node keeps a count and a total; ``self`` is the part of its total that no child
accounts for.

    from runner.timers import timers

    with timers("env_step"):
        with timers("env_wait"):
            infos = env.step(actions)

    @timed("update")
    def update_model(self): ...

    timers.write_json(os.path.join(model_path, "timers.json"))

Cost on the hot path: one small object, two ``perf_counter`` calls, a dict lookup and a list
push/pop per ``with`` (about a microsecond; ``python -m runner.timers`` measures it here). One
``Timers`` belongs to one thread: a thread of its own (an environment worker) should use its own
``Timers`` and merge nothing, since wall time spent in parallel does not add up.
"""
from __future__ import annotations

import functools
import json
import time
from typing import Any, Callable, Dict, List, Optional, TypeVar

__all__ = ["Timers", "TimerNode", "timers", "timed", "NAMES"]

F = TypeVar("F", bound=Callable[..., Any])

#: The names the trainer controller uses (so benchmarks can read them without guessing).
NAMES = ("env_step", "env_wait", "inference", "buffer", "update", "background_update", "summaries", "checkpoint",
         "export")


class TimerNode:
    """One named timer under its parent: how often it ran and for how long in total (seconds)."""

    __slots__ = ("name", "count", "total", "children")

    def __init__(self, name: str):
        self.name = name
        self.count = 0
        self.total = 0.0
        self.children: Dict[str, "TimerNode"] = {}

    def child(self, name: str) -> "TimerNode":
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = TimerNode(name)
        return node

    def to_dict(self) -> Dict[str, Any]:
        children = {name: node.to_dict() for name, node in self.children.items()}
        inner = sum(node.total for node in self.children.values())
        out: Dict[str, Any] = {"total": self.total, "count": self.count, "self": max(self.total - inner, 0.0)}
        if children:
            out["children"] = children
        return out


class _Scope:
    """What ``with timers(name)`` enters; it records into the node under the timer open at entry."""

    __slots__ = ("_timers", "_name", "_node", "_start")

    def __init__(self, owner: "Timers", name: str):
        self._timers = owner
        self._name = name

    def __enter__(self) -> "_Scope":
        owner = self._timers
        stack = owner._stack
        self._node = node = stack[-1].child(self._name)
        stack.append(node)
        self._start = owner._clock()
        return self

    def __exit__(self, *exc: Any) -> None:
        owner = self._timers
        node = self._node
        node.total += owner._clock() - self._start
        node.count += 1
        stack = owner._stack
        if stack[-1] is node:
            stack.pop()
        else:  # a scope left out of order (a generator closed late): unwind to it
            while len(stack) > 1 and stack.pop() is not node:
                pass


class Timers:
    """A tree of timers rooted at the run; ``timers(name)`` is a context manager.

    :param clock: a monotonic clock in seconds (``time.perf_counter``); tests pass a fake one.
    """

    def __init__(self, name: str = "root", clock: Callable[[], float] = time.perf_counter):
        self._clock = clock
        self._name = name
        self.reset()

    def reset(self) -> None:
        """Forget every timer and gauge; the root's wall time starts now."""
        self.root = TimerNode(self._name)
        self._stack: List[TimerNode] = [self.root]
        self._started = self._clock()
        self.gauges: Dict[str, Dict[str, float]] = {}
        self.metadata: Dict[str, Any] = {}

    def __call__(self, name: str) -> _Scope:
        return _Scope(self, name)

    def record(self, name: str, total: float, count: int) -> None:
        """A timer kept elsewhere (another thread's): its totals so far, as a node under the root."""
        node = self.root.child(name)
        node.total, node.count = float(total), int(count)

    def set_gauge(self, name: str, value: float) -> None:
        """Record a level (buffer size, agents alive): its last value, min, max and how often it was set."""
        gauge = self.gauges.get(name)
        value = float(value)
        if gauge is None:
            self.gauges[name] = {"value": value, "min": value, "max": value, "count": 1}
        else:
            gauge["value"] = value
            gauge["min"] = min(gauge["min"], value)
            gauge["max"] = max(gauge["max"], value)
            gauge["count"] += 1

    def to_dict(self) -> Dict[str, Any]:
        """The tree as ML-Agents' ``timers.json`` lays it out: the root's total is the wall time so far."""
        self.root.total = self._clock() - self._started
        self.root.count = 1
        out = {"name": self.root.name, **self.root.to_dict()}
        if self.gauges:
            out["gauges"] = {k: dict(v) for k, v in self.gauges.items()}
        started = time.time() - self.root.total
        out["metadata"] = {"timer_format_version": "0.1.0", "start_time_seconds": f"{started:.0f}",
                           **self.metadata}
        return out

    def write_json(self, path: str) -> str:
        """Write :meth:`to_dict` to ``path`` atomically (temporary file, then rename); return the path."""
        from trainers.export.frozen_graph import (
            write_atomically,  # here, not at the top: this module needs no TensorFlow
        )

        return write_atomically(path, json.dumps(self.to_dict(), indent=2).encode("utf-8"))

    def find(self, *path: str) -> Optional[TimerNode]:
        """The node at ``path`` below the root (``find("env_step", "env_wait")``), or None."""
        node: Optional[TimerNode] = self.root
        for name in path:
            node = node.children.get(name) if node is not None else None
        return node


#: The run's timers: the controller, the trainers and the benchmarks share this one.
timers = Timers()


def timed(name: Optional[str] = None, owner: Optional[Timers] = None) -> Callable[[F], F]:
    """Decorator: time every call of the function as ``name`` (default: its ``__qualname__``)."""

    def decorate(fn: F) -> F:
        label = name or fn.__qualname__

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with (owner or timers)(label):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def _measure(n: int = 200_000) -> None:
    """Print the cost of one ``with`` (nested one level) against an empty loop."""
    bench = Timers()
    start = time.perf_counter()
    for _ in range(n):
        pass
    empty = time.perf_counter() - start
    start = time.perf_counter()
    with bench("outer"):
        for _ in range(n):
            with bench("inner"):
                pass
    cost = (time.perf_counter() - start - empty) / n
    print(f"one `with timers(name)`: {cost * 1e6:.2f} us ({n} runs)")


if __name__ == "__main__":
    _measure()
