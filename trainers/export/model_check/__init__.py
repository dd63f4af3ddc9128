"""Will Unity load this policy? A check of an ``.onnx`` file against each Unity inference engine's importer
(Barracuda, Sentis, the Inference Engine) and against what the ML-Agents C# package of that engine then
checks, before Unity is opened.

The rules are data: one table per engine version under ``engines/`` and one per C# package under
``packages/`` (see :mod:`trainers.export.model_check.tables`); the code knows only the kinds of rule.
``check_model`` reads any policy (ours, ``mlagents-learn``'s, a user's); the export checks every file it
writes against :data:`EXPORT_ENGINES`, and ``unityagents-check-model`` is the command
(:mod:`trainers.export.model_check.cli`). It needs ``onnx`` and ``pyyaml`` only: no TensorFlow.
"""
from __future__ import annotations

from typing import Any, Iterable, List, Optional, Sequence

from trainers.export.model_check.importer import check_engine
from trainers.export.model_check.mlagents import check_package
from trainers.export.model_check.report import FAILS, LOADS, WARNS, Finding, Report, Verdict
from trainers.export.model_check.tables import TableError, engine_names, engine_table, package_table
from trainers.export.model_check.view import ModelView, NotAModel, load_model

#: Every engine version with a table.
ENGINES: List[str] = engine_names()
#: The engines of the C# packages ML-Agents Release 19 and later ship: each export is checked against them.
EXPORT_ENGINES: List[str] = [name for name in ENGINES if engine_table(name).get("checked_at_export")]


def resolve_engines(names: Optional[Iterable[str]]) -> List[str]:
    """``names`` with ``all`` expanded (None: every engine); an unknown name is refused naming the known ones."""
    wanted: List[str] = []
    for name in names or ["all"]:
        for part in str(name).split(","):
            part = part.strip()
            if part == "all":
                wanted += ENGINES
            elif part == "export":
                wanted += EXPORT_ENGINES
            elif part in ENGINES:
                wanted.append(part)
            elif part:
                raise ValueError(f"unknown engine {part!r}; the engines are: {', '.join(ENGINES)}, all, export")
    return list(dict.fromkeys(wanted))


def check_model(source: Any, engines: Optional[Sequence[str]] = None, path: Optional[str] = None) -> Report:
    """Check ``source`` (a path, bytes or an ``onnx.ModelProto``) against ``engines`` (default: all).

    Raises :class:`NotAModel` for a file that is not an ONNX model.
    """
    model = load_model(source)
    view = ModelView(model)
    verdicts = []
    for name in resolve_engines(engines):
        table = engine_table(name)
        findings = check_engine(view, table) + check_package(view, package_table(table["package"]), table)
        verdicts.append(Verdict(name, table["title"], table["package"], findings))
    label = path or (str(source) if isinstance(source, str) else "<model>")
    return Report(label, " ".join(p for p in (model.producer_name, model.producer_version) if p),
                  view.default_opset(), verdicts)


__all__ = ["ENGINES", "EXPORT_ENGINES", "FAILS", "LOADS", "WARNS", "Finding", "ModelView", "NotAModel", "Report",
           "TableError", "Verdict", "check_model", "resolve_engines"]
