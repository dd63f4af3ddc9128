"""Findings, per-engine verdicts and the report the command prints (text or JSON)."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

#: ``error``: the engine refuses the file or the policy does not run; ``warning``: it imports, and
#: Unity warns or computes something other than the file says; ``note``: worth knowing, no effect.
SEVERITIES = ("error", "warning", "note")

LOADS = "imports and runs"
WARNS = "imports with warnings"
FAILS = "fails"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One rule a model breaks in one engine: where, which rule, and what Unity would say."""

    engine: str
    severity: str
    rule: str
    node: str
    message: str
    source: str
    fix: Optional[str] = None

    def line(self) -> str:
        text = f"{self.severity}: [{self.rule}] {self.node}: {self.message}"
        return text + (f" Fix: {self.fix}" if self.fix else "")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One engine version's answer for a model."""

    engine: str
    title: str
    package: str
    findings: List[Finding]

    @property
    def status(self) -> str:
        severities = {f.severity for f in self.findings}
        return FAILS if "error" in severities else WARNS if "warning" in severities else LOADS

    @property
    def loads(self) -> bool:
        return self.status != FAILS

    def problems(self) -> List[Finding]:
        """The findings that are not notes: what an export reports."""
        return [f for f in self.findings if f.severity != "note"]


@dataclasses.dataclass(frozen=True)
class Report:
    path: str
    producer: str
    opset: Optional[int]
    verdicts: List[Verdict]

    @property
    def loads_everywhere(self) -> bool:
        return all(v.loads for v in self.verdicts)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "path": self.path, "producer": self.producer, "opset": self.opset,
            "loads": self.loads_everywhere,
            "engines": [{"engine": v.engine, "title": v.title, "package": f"com.unity.ml-agents {v.package}",
                         "verdict": v.status, "findings": [dataclasses.asdict(f) for f in v.findings]}
                        for v in self.verdicts],
        }

    def text(self, notes: bool = False) -> str:
        lines = [f"{self.path}: {self.producer or 'unknown producer'}, opset {self.opset}"]
        for v in self.verdicts:
            shown = [f for f in v.findings if notes or f.severity != "note"]
            lines.append(f"  {v.engine:14s} ({v.title}, com.unity.ml-agents {v.package}): {v.status}")
            lines += [f"    {f.line()}" for f in shown]
        bad = [v.engine for v in self.verdicts if not v.loads]
        lines.append(f"fails in: {', '.join(bad)}" if bad else "loads in every engine checked")
        return "\n".join(lines)
