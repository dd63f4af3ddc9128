"""``unityagents-check-model``: will Unity load this policy? Ask before opening the Editor.

Reads any ``.onnx`` policy (ours, ``mlagents-learn``'s, a user's) and prints, per engine version, a
verdict (imports and runs / imports with warnings / fails) and each finding with its node, its rule
and what Unity would say. Exit status: 0 when every engine asked for loads every file, 1 when one
does not, 2 when a file is not an ONNX model (or the command line is wrong).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from trainers.export.model_check import ENGINES, EXPORT_ENGINES, NotAModel, check_model, resolve_engines
from trainers.export.model_check.tables import engine_table

EPILOG = ("engines: " + ", ".join(ENGINES) + "; 'all' (the default) names every one, 'export' those of the C# "
          "packages ML-Agents Release 19+ ships (" + ", ".join(EXPORT_ENGINES) + "). Exit status: 0 every engine "
          "loads the model, 1 one does not, 2 not an ONNX model.")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="unityagents-check-model",
        description="Check an .onnx policy against the importers of Unity's inference engines (Barracuda, "
                    "Sentis, the Inference Engine) and the checks of the ML-Agents C# package that uses each.",
        epilog=EPILOG)
    p.add_argument("models", nargs="*", metavar="file.onnx", help="the policy file(s) to check")
    p.add_argument("--engine", action="append", metavar="NAME",
                   help="an engine version (repeat, or separate with commas); default: all")
    p.add_argument("--json", action="store_true", help="print one JSON document (a list, one entry per file)")
    p.add_argument("--notes", action="store_true", help="also print notes (e.g. ops a GPU worker runs on the CPU)")
    p.add_argument("--list-engines", action="store_true", help="list the engine versions and the packages shipping "
                   "them, then exit")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    if args.list_engines:
        for name in ENGINES:
            table = engine_table(name)
            shipped = ", ".join(table.get("shipped_with") or []) or "no ML-Agents release (an upgrade)"
            print(f"{name:14s} {table['title']:26s} checked by com.unity.ml-agents {table['package']}; shipped by "
                  f"{shipped}{'; checked at every export' if table.get('checked_at_export') else ''}")
        return 0
    if not args.models:
        print("unityagents-check-model: give the .onnx file(s) to check (see --help).", file=sys.stderr)
        return 2
    try:
        engines = resolve_engines(args.engine)
    except ValueError as e:
        print(f"unityagents-check-model: {e}", file=sys.stderr)
        return 2
    status, documents = 0, []
    for path in args.models:
        try:
            report = check_model(path, engines, path=path)
        except NotAModel as e:
            status = 2
            if args.json:
                documents.append({"path": path, "error": str(e)})
            else:
                print(f"unityagents-check-model: {e}", file=sys.stderr)
            continue
        except Exception as e:  # a model the rules cannot read: one line, and it is the checker's to fix
            status = 2
            why = f"{path}: cannot be checked ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); " \
                  "this is a bug of the check, please report it with the file."
            if args.json:
                documents.append({"path": path, "error": why})
            else:
                print(f"unityagents-check-model: {why}", file=sys.stderr)
            continue
        if not report.loads_everywhere:
            status = max(status, 1)
        if args.json:
            documents.append(report.as_dict())
        else:
            print(report.text(notes=args.notes))
    if args.json:
        print(json.dumps(documents, indent=1))
    return status


def cli() -> None:
    """Console-script entry point (``unityagents-check-model``)."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
