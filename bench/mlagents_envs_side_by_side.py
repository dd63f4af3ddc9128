"""unityagents' mlagents_envs door beside mlagents_envs 1.1 itself: the same calls, both outputs compared.

mlagents_envs 1.1 needs Python <= 3.10 and numpy 1.x, so it runs in its own virtual environment,
whose interpreter this script starts::

    python -m venv /path/venv-mlagents-envs          # with a Python 3.10
    /path/venv-mlagents-envs/bin/pip install numpy==1.23.5 protobuf==3.20.3 grpcio cloudpickle pyyaml \\
        Pillow filelock gym==0.26.2 pettingzoo==1.22.3
    /path/venv-mlagents-envs/bin/pip install --no-deps --ignore-requires-python mlagents-envs==1.1.0
    python bench/mlagents_envs_side_by_side.py --peer /path/venv-mlagents-envs/bin/python

(``--peer`` defaults to ``$MLAGENTS_ENVS_PYTHON``.) Each side runs ``probe(package)`` below in
its own process, with the same calls and the module names mapped (``mlagents_envs.side_channel.*``
-> ``unityagents.side_channels``, ...), and prints JSON: the bytes each side channel writes
(``SideChannelManager.generate_side_channel_messages``), what each reads back, ``empty_action`` /
``random_action`` (shapes, dtypes, bounds), the gym wrapper's spaces over the same mock ``BaseEnv``,
and each public name's parameters. The script prints one line per fact, ``same`` or both values,
then ``RESULT <same>/<all>``. ``tests/unityagents/test_mlagents_envs_door.py`` records the peer's
side of these facts.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: mlagents_envs module -> its place here (the README's table).
MODULES = {
    "mlagents_envs.base_env": "unityagents.base_env",
    "mlagents_envs.environment": "unityagents.environment",
    "mlagents_envs.exception": "unityagents.exception",
    "mlagents_envs.registry": "unityagents.registry",
    "mlagents_envs.side_channel": "unityagents.side_channels",
    "mlagents_envs.side_channel.side_channel_manager": "unityagents.side_channels",
    "mlagents_envs.side_channel.engine_configuration_channel": "unityagents.side_channels",
    "mlagents_envs.side_channel.environment_parameters_channel": "unityagents.side_channels",
    "mlagents_envs.side_channel.float_properties_channel": "unityagents.side_channels",
    "mlagents_envs.side_channel.raw_bytes_channel": "unityagents.side_channels",
    "mlagents_envs.side_channel.stats_side_channel": "unityagents.side_channels",
    "mlagents_envs.envs.unity_gym_env": "unityagents.envs.unity_gym_env",
}


def probe(package: str) -> dict:
    """The facts, computed with ``package`` (``mlagents_envs`` or ``unityagents``)."""
    import importlib
    import inspect
    import uuid

    import numpy as np

    def mod(name: str):
        return importlib.import_module(name if package == "mlagents_envs" else MODULES[name])

    sc = mod("mlagents_envs.side_channel.side_channel_manager")
    ec = mod("mlagents_envs.side_channel.engine_configuration_channel")
    ep = mod("mlagents_envs.side_channel.environment_parameters_channel")
    fp = mod("mlagents_envs.side_channel.float_properties_channel")
    rb = mod("mlagents_envs.side_channel.raw_bytes_channel")
    st = mod("mlagents_envs.side_channel.stats_side_channel")
    base = mod("mlagents_envs.side_channel")
    be = mod("mlagents_envs.base_env")
    facts: dict = {}

    def written(channel) -> str:
        return bytes(sc.SideChannelManager([channel]).generate_side_channel_messages()).hex()

    engine = ec.EngineConfigurationChannel()
    engine.set_configuration(ec.EngineConfig.default_config())
    facts["engine default_config"] = written(engine)
    engine.set_configuration_parameters(width=64, height=48, time_scale=2.5)
    facts["engine 64x48 time_scale 2.5"] = written(engine)
    params = ep.EnvironmentParametersChannel()
    params.set_float_parameter("gravity", 9.81)
    params.set_uniform_sampler_parameters("mass", 0.5, 2.0, 7)
    params.set_gaussian_sampler_parameters("scale", 1.0, 0.1, 3)
    params.set_multirangeuniform_sampler_parameters("length", [(1.0, 2.0), (4.0, 5.0)], 11)
    facts["environment parameters"] = written(params)
    floats = fp.FloatPropertiesChannel()
    floats.set_property("speed", 3.0)
    facts["float properties"] = written(floats)
    raw = rb.RawBytesChannel(uuid.UUID("a85ba5c0-4f87-11ea-a517-784f4387d1f7"))
    raw.send_raw_data(b"foo")
    raw.send_raw_data(bytearray(b"\x00\x01"))
    facts["raw bytes"] = written(raw)
    out = base.OutgoingMessage()
    out.write_bool(True)
    out.write_int32(-2)
    out.write_float32(0.5)
    out.write_float32_list([1.0, 3.0])
    out.write_string("mlagents!")
    facts["outgoing message"] = bytes(out.buffer).hex()
    msg = base.IncomingMessage(bytes(out.buffer))
    facts["incoming message"] = [msg.read_bool(), msg.read_int32(), msg.read_float32(), msg.read_float32_list(),
                                 msg.read_string(), msg.read_int32(default_value=7), msg.read_string("x")]
    stats = st.StatsSideChannel()
    stat = base.OutgoingMessage()
    stat.write_string("stats-1")
    stat.write_float32(42.0)
    stat.write_int32(1)
    frame = stats.channel_id.bytes_le + len(stat.buffer).to_bytes(4, "little") + bytes(stat.buffer)
    sc.SideChannelManager([stats]).process_side_channel_message(frame)
    facts["stats received"] = {k: [(v, m.name) for v, m in vs] for k, vs in stats.get_and_reset_stats().items()}
    facts["channel ids"] = [str(c.channel_id) for c in (engine, params, floats, stats)]

    for name, spec in [("continuous 3", be.ActionSpec.create_continuous(3)),
                       ("discrete (3, 2)", be.ActionSpec.create_discrete((3, 2))),
                       ("hybrid 2 (4,)", be.ActionSpec.create_hybrid(2, (4,)))]:
        empty = spec.empty_action(5)
        rand = spec.random_action(200)
        facts[f"empty_action {name}"] = [list(empty.continuous.shape), str(empty.continuous.dtype),
                                         float(np.abs(empty.continuous).sum()), list(empty.discrete.shape),
                                         str(empty.discrete.dtype), int(np.abs(empty.discrete).sum())]
        facts[f"random_action {name}"] = [
            list(rand.continuous.shape), str(rand.continuous.dtype),
            bool(rand.continuous.size == 0 or (rand.continuous.min() >= -1 and rand.continuous.max() <= 1)),
            list(rand.discrete.shape), str(rand.discrete.dtype),
            [int(rand.discrete[:, k].max()) < b for k, b in enumerate(spec.discrete_branches)],
            [int(rand.discrete[:, k].min()) >= 0 for k, _ in enumerate(spec.discrete_branches)]]
        facts[f"str {name}"] = [spec.is_continuous(), spec.is_discrete(), spec.discrete_size]

    try:
        facts.update(_gym_spaces(package, be))
    except ImportError as e:  # the peer without gym
        facts["gym"] = f"not importable: {e}"
    facts["signatures"] = {}
    for path in SIGNED:
        module_name, _, qual = path.partition(":")
        obj = mod(module_name)
        try:
            for part in qual.split("."):
                obj = getattr(obj, part)
            params = [p.name + ("" if p.default is p.empty else "=" + repr(p.default))
                      for p in inspect.signature(obj).parameters.values() if p.name not in ("self", "cls")]
        except (AttributeError, ValueError, ImportError) as e:
            params = [f"missing: {type(e).__name__}"]
        facts["signatures"][path] = params
    return facts


#: Callables whose parameters are compared (``module:qualified.name``, module as mlagents_envs names it).
SIGNED = [
    "mlagents_envs.side_channel:SideChannel.__init__",
    "mlagents_envs.side_channel:IncomingMessage.__init__",
    "mlagents_envs.side_channel:IncomingMessage.read_bool",
    "mlagents_envs.side_channel:IncomingMessage.read_int32",
    "mlagents_envs.side_channel:IncomingMessage.read_float32",
    "mlagents_envs.side_channel:IncomingMessage.read_float32_list",
    "mlagents_envs.side_channel:IncomingMessage.read_string",
    "mlagents_envs.side_channel:OutgoingMessage.write_bool",
    "mlagents_envs.side_channel:OutgoingMessage.write_float32_list",
    "mlagents_envs.side_channel:OutgoingMessage.write_string",
    "mlagents_envs.side_channel:OutgoingMessage.set_raw_bytes",
    "mlagents_envs.side_channel.side_channel_manager:SideChannelManager.__init__",
    "mlagents_envs.side_channel.float_properties_channel:FloatPropertiesChannel.__init__",
    "mlagents_envs.side_channel.raw_bytes_channel:RawBytesChannel.__init__",
    "mlagents_envs.side_channel.raw_bytes_channel:RawBytesChannel.send_raw_data",
    "mlagents_envs.base_env:ActionSpec.random_action",
    "mlagents_envs.base_env:BehaviorMapping.__init__",
    "mlagents_envs.exception:UnityWorkerInUseException.__init__",
    "mlagents_envs.envs.unity_gym_env:UnityToGymWrapper.__init__",
]


def _gym_spaces(package: str, be) -> dict:
    """The gym wrapper's spaces over one mock ``BaseEnv`` per spec (no process, no socket)."""
    import importlib

    if package == "mlagents_envs":  # its envs package lists its registry, which downloads a manifest: not offline
        importlib.import_module("mlagents_envs.registry").default_registry.clear()
    gym_env = importlib.import_module(MODULES["mlagents_envs.envs.unity_gym_env"] if package != "mlagents_envs"
                                      else "mlagents_envs.envs.unity_gym_env")
    specs = {
        "vector 8 / continuous 2": ([(8,)], be.ActionSpec.create_continuous(2)),
        "camera (3, 84, 84) + vector 2 / discrete (4,)": ([(3, 84, 84), (2,)], be.ActionSpec.create_discrete((4,))),
        "vectors 5 + 1 / discrete (3, 2)": ([(5,), (1,)], be.ActionSpec.create_discrete((3, 2))),
    }
    out = {}
    for label, (shapes, action) in specs.items():
        for kwargs in ({}, {"uint8_visual": True, "allow_multiple_obs": True, "flatten_branched": True}):
            env = _mock_env(be, shapes, action)
            wrapper = gym_env.UnityToGymWrapper(env, **kwargs)
            reset = wrapper.reset()
            obs = reset[0] if isinstance(reset, tuple) and len(reset) == 2 and isinstance(reset[1], dict) else reset
            out[f"gym {label} {sorted(kwargs)}"] = [_space(wrapper.observation_space), _space(wrapper.action_space),
                                                    bool(wrapper.observation_space.contains(
                                                        tuple(obs) if isinstance(obs, list) else obs))]
    return out


def _space(space) -> str:
    """A space as text both gym and gymnasium print alike."""
    name = type(space).__name__
    if name == "Tuple":
        return "Tuple(" + ", ".join(_space(s) for s in space.spaces) + ")"
    if name == "Box":
        return f"Box({float(space.low.min())}, {float(space.high.max())}, {tuple(space.shape)}, {space.dtype})"
    if name == "Discrete":
        return f"Discrete({int(space.n)})"
    if name == "MultiDiscrete":
        return f"MultiDiscrete({[int(n) for n in space.nvec]})"
    return repr(space)


def _mock_env(be, shapes, action_spec):
    """A one-behaviour, one-agent ``BaseEnv`` that answers from arrays."""
    import numpy as np

    obs_specs = [be.ObservationSpec(tuple(s), tuple(be.DimensionProperty.UNSPECIFIED for _ in s),
                                    be.ObservationType.DEFAULT, f"sensor{i}") for i, s in enumerate(shapes)]
    spec = be.BehaviorSpec(obs_specs, action_spec)

    class Mock(be.BaseEnv):
        def __init__(self):
            self.n = 0

        def step(self):
            self.n += 1

        def reset(self):
            self.n = 0

        def close(self):
            pass

        @property
        def behavior_specs(self):
            return be.BehaviorMapping({"B?team=0": spec})

        def set_actions(self, behavior_name, action):
            pass

        def set_action_for_agent(self, behavior_name, agent_id, action):
            pass

        def get_steps(self, behavior_name):
            obs = [np.full((1,) + tuple(s), 0.5, np.float32) for s in shapes]
            masks = [np.zeros((1, b), bool) for b in action_spec.discrete_branches] or None
            decisions = be.DecisionSteps(obs, np.zeros(1, np.float32), np.array([0], np.int32), masks,
                                         np.zeros(1, np.int32), np.zeros(1, np.float32))
            return decisions, be.TerminalSteps.empty(spec)

    return Mock()


def run_side(python: str, package: str) -> dict:
    code = (f"import json, sys; sys.path.insert(0, {HERE!r}); sys.path.insert(0, {ROOT!r}); "
            f"import mlagents_envs_side_by_side as m; print('FACTS' + json.dumps(m.probe({package!r})))")
    env = dict(os.environ, PYTHONPATH=ROOT if package == "unityagents" else "")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("FACTS")]
    if done.returncode or not lines:
        raise SystemExit(f"{python} ({package}) failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][5:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", default=os.environ.get("MLAGENTS_ENVS_PYTHON"),
                        help="the Python of a virtual environment with mlagents-envs 1.1.0 (default: "
                             "$MLAGENTS_ENVS_PYTHON)")
    parser.add_argument("--json", help="also write both sides' facts here")
    args = parser.parse_args()
    if not args.peer:
        raise SystemExit("Give the peer's interpreter: --peer /path/venv-mlagents-envs/bin/python (or set "
                         "MLAGENTS_ENVS_PYTHON); see this script's docstring for the virtual environment.")
    ours, theirs = run_side(sys.executable, "unityagents"), run_side(args.peer, "mlagents_envs")
    same = total = 0
    for key in theirs:
        pairs = ([(f"{key} {k}", ours.get(key, {}).get(k), v) for k, v in theirs[key].items()]
                 if key == "signatures" else [(key, ours.get(key), theirs[key])])
        for label, a, b in pairs:
            total += 1
            if a == b:
                same += 1
                print(f"same      {label}")
            else:
                print(f"DIFFERENT {label}\n    unityagents:   {a}\n    mlagents_envs: {b}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"unityagents": ours, "mlagents_envs": theirs}, f, indent=1)
    print(f"RESULT {same}/{total} facts the same")


if __name__ == "__main__":
    main()
