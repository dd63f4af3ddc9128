"""``python -m academy <Scene> --port N``: what ``UnityEnvironment`` launches for a built-in scene.

With ``--port`` the scene connects to the trainer listening on 127.0.0.1:N and serves it until
``EXIT`` (exit status 0), a lost connection (1) or a protocol violation (3). Without ``--port`` it
runs stand-alone: External brains act with the scene's heuristic (or a graph given with
``--brain NAME=internal:PATH``) for ``--episodes`` agent episodes per brain, and one line
``mean_reward <brain> <value>`` per brain is printed. With ``--record-demo FILE`` the brain given
as ``--brain NAME=heuristic`` (or the scene's only brain) is recorded into a ``.demo`` file, as
Unity's Demonstration Recorder would (``demo_recorder.py``), for ``--episodes`` episodes.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING

from academy import SCENES, load_scene

if TYPE_CHECKING:
    from academy.academy import Academy
    from academy.communicator import ExternalCommunicator

EXIT_OK, EXIT_CONNECTION, EXIT_USAGE, EXIT_PROTOCOL = 0, 1, 2, 3
log = logging.getLogger("academy")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m academy",
        description="Run a built-in scene as a Unity API-2 environment, or stand-alone.",
        epilog=f"scenes: {', '.join(SCENES)}")
    parser.add_argument("scene", help="built-in scene name")
    parser.add_argument("--port", type=int, help="connect to a trainer on 127.0.0.1:PORT")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the scene (default 0)")
    parser.add_argument("--log-file", "-logFile", dest="log_file",
                        help="write the log here (its absolute path is sent as logPath)")
    modern = parser.add_argument_group("modern ML-Agents protocol (gRPC), as a Unity player gets it")
    modern.add_argument("--mlagents-port", type=int, metavar="PORT",
                        help="serve a trainer's gRPC server on 127.0.0.1:PORT (communication API 1.5.0)")
    modern.add_argument("--package-version", default="3.0.0",
                        help="C# package version to report (default 3.0.0: [C,H,W] cameras; 2.x: [H,W,C])")
    modern.add_argument("--decision-period", type=int, metavar="K",
                        help="every brain asks for a decision every K steps (default: the scene's)")
    modern.add_argument("-batchmode", action="store_true", help="accepted, like a Unity player")
    modern.add_argument("-nographics", action="store_true", help="accepted, like a Unity player")
    parser.add_argument("--episodes", type=int, default=10,
                        help="stand-alone: agent episodes per brain to average (default 10)")
    parser.add_argument("--brain", action="append", default=[], metavar="NAME=TYPE",
                        help="override a brain's type: NAME=external, NAME=heuristic or "
                             "NAME=internal:PATH[#SCOPE]")
    parser.add_argument("--frame-time-ms", type=float, default=0.0, metavar="F",
                        help="emulate a heavy engine: sleep F ms per decision, in every mode (default 0)")
    parser.add_argument("--record-demo", metavar="FILE",
                        help="stand-alone: record the heuristic brain (--brain NAME=heuristic, or the only "
                             "brain) for --episodes episodes into FILE, a Unity .demo file")
    parser.add_argument("--no-broadcast", action="append", default=[], metavar="NAME",
                        help="turn off broadcast for a non-External brain")
    return parser


def _brain_configs(scene_cls: type, overrides: list[str], silent: list[str], seed: int) -> dict:
    """Turn ``--brain`` / ``--no-broadcast`` into BrainConfigs; ValueError on a bad spec."""
    from academy.brain import BRAIN_TYPES, BrainConfig

    specs = {spec.name: spec for spec in scene_cls.brains}
    configs = {name: BrainConfig(spec.brain_type) for name, spec in specs.items()}
    for override in overrides:
        name, sep, kind = override.partition("=")
        if not sep or name not in specs:
            raise ValueError(f"--brain {override!r}: expected NAME=TYPE with NAME one of {sorted(specs)}")
        kind, _, target = kind.partition(":")
        if kind not in BRAIN_TYPES or (kind == "internal") != bool(target):
            raise ValueError(f"--brain {override!r}: TYPE must be external, heuristic or internal:PATH[#SCOPE]")
        configs[name] = BrainConfig(kind)
        if kind == "internal":
            from academy.internal import load_internal_brain

            path, _, scope = target.partition("#")
            configs[name].policy = load_internal_brain(path, specs[name], scope, seed=seed)  # .bytes or .onnx
    for name in silent:
        if name not in specs:
            raise ValueError(f"--no-broadcast {name!r}: no such brain; brains are {sorted(specs)}")
        configs[name].broadcast = False
    return configs


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the scene, return the exit status."""
    args, unknown = _parser().parse_known_args(argv)
    log_path = os.path.abspath(args.log_file) if args.log_file else ""
    handler = logging.FileHandler(log_path) if log_path else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    if unknown:  # a Unity player ignores arguments it does not know; so do we, visibly
        log.warning("ignoring unknown arguments %s", unknown)

    from academy.academy import Academy
    from academy.communicator import ConnectionLost, ExternalCommunicator

    if args.record_demo and (args.mlagents_port is not None or args.port is not None):
        print("python -m academy: error: --record-demo plays the scene on its own (its heuristic); it cannot also "
              "serve a trainer (--mlagents-port / --port). Drop one of them.", file=sys.stderr)
        return EXIT_USAGE
    try:
        scene_cls = load_scene(args.scene)
        configs = _brain_configs(scene_cls, args.brain, args.no_broadcast, args.seed)
        academy = Academy(scene_cls(args.seed), configs, frame_time_ms=args.frame_time_ms)
    except (ValueError, OSError) as exc:
        print(f"python -m academy: error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    if args.mlagents_port is not None:
        from academy.grpc_communicator import serve_modern

        log.info("serving %s to the gRPC trainer on port %d (package %s)", args.scene, args.mlagents_port,
                 args.package_version)
        def replicate(areas: int) -> "Academy":  # the trainer's num_areas, as a TrainingAreaReplicator reads it
            from academy.envs.replicated import ReplicatedScene

            return Academy(ReplicatedScene(scene_cls, args.seed, areas), configs, frame_time_ms=args.frame_time_ms)

        return serve_modern(academy, args.mlagents_port, args.package_version, args.decision_period, log_path,
                            replicate)

    if args.record_demo:
        return _record(academy, args)

    if args.port is None:
        for brain, mean in academy.run_episodes(args.episodes).items():
            print(f"mean_reward {brain} {mean:.4f}")
        return EXIT_OK

    comm = ExternalCommunicator(args.port)
    try:
        comm.connect()
    except ConnectionLost as exc:
        log.error("%s; exiting", exc)
        comm.close()
        return EXIT_CONNECTION
    log.info("connected to the trainer on port %d; serving %s", args.port, args.scene)
    return serve_trainer(academy, comm, log_path)


def _record(academy: "Academy", args: argparse.Namespace) -> int:
    """``--record-demo``: record one brain's heuristic; print its mean reward and the file's size."""
    from academy.demo_recorder import record_demonstration

    named = [o.partition("=")[0] for o in args.brain if o.partition("=")[2] == "heuristic"]
    brains = [b.name for b in academy.brains]
    if len(named) > 1 or (not named and len(brains) != 1):
        print(f"python -m academy: error: --record-demo records one brain; name it with --brain NAME=heuristic "
              f"(NAME one of {brains}){'' if not named else f', not {len(named)} of them'}", file=sys.stderr)
        return EXIT_USAGE
    brain = named[0] if named else brains[0]
    try:
        meta = record_demonstration(academy, brain, args.record_demo, args.episodes, args.package_version,
                                    args.decision_period)
    except (ValueError, OSError) as exc:
        print(f"python -m academy: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"mean_reward {brain} {meta.mean_reward:.4f}")
    print(f"recorded {args.record_demo}: {meta.number_steps} steps, {meta.number_episodes} episodes")
    return EXIT_OK


def serve_trainer(academy: "Academy", comm: "ExternalCommunicator", log_path: str = "") -> int:
    """Serve a connected trainer until it quits; return the exit status, and close ``comm``.

    0 after EXIT (or any other command: Unity quits on it), 1 when the connection is lost or a
    started message stalls, 3 when the trainer's bytes or values break the protocol. Each of these
    is one logged line, never a traceback, whatever the trainer sends (tests/academy/test_academy_fuzz.py).
    """
    from academy.checks import TrainerMessageError
    from academy.communicator import ConnectionLost, ProtocolError

    try:
        command = academy.serve(comm, log_path)
        log.info("received %r: quitting", command)
        return EXIT_OK
    except ConnectionLost as exc:
        log.error("%s; exiting", exc)
        return EXIT_CONNECTION
    except (ProtocolError, TrainerMessageError) as exc:
        log.error("protocol error: %s; exiting", exc)
        return EXIT_PROTOCOL
    finally:
        comm.close()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
