"""The rules as data: one YAML table per engine version (``engines/``), one per ML-Agents C# package
(``packages/``), and the fixes to suggest per refused op (``hints.yaml``).

An engine table lists the op types its importer dispatches on, the constants and graph features it
refuses or changes, and rule rows of a few kinds (see :mod:`trainers.export.model_check.importer`);
every row carries the ``source`` it was read in. A table may be ``based_on`` an older version's: it
then names only what changed (``ops_added``, ``ops_removed``, ``rules_added``, ``rules_removed``,
and any top-level key it sets again), so a new engine version is one new file.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Dict, List

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE_DIR = os.path.join(HERE, "engines")
PACKAGE_DIR = os.path.join(HERE, "packages")

#: libyaml's safe loader where PyYAML has it (the tables are read at every run's start), else PyYAML's own.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: The keys a derived table uses to name what changed from its base; never inherited themselves.
_CHANGES = ("based_on", "ops_added", "ops_removed", "rules_added", "rules_removed")


class TableError(ValueError):
    """A rule table is malformed (a bug in the shipped data, or in a table a user added)."""


def engine_names() -> List[str]:
    """Every engine version with a table, oldest family first (barracuda, sentis, ie), then by version."""
    names = [f[: -len(".yaml")] for f in os.listdir(ENGINE_DIR) if f.endswith(".yaml")]
    family = {"barracuda": 0, "sentis": 1, "ie": 2}

    def key(name: str):
        kind, _, version = name.partition("-")
        return family.get(kind, 3), tuple(int(p) if p.isdigit() else 0 for p in version.split("."))

    return sorted(names, key=key)


@functools.lru_cache(maxsize=None)
def engine_table(name: str) -> Dict[str, Any]:
    """The full table of engine ``name`` (its base tables merged in); ``ops`` becomes a frozenset."""
    raw = _read(os.path.join(ENGINE_DIR, f"{name}.yaml"), name)
    base_name = raw.get("based_on")
    if base_name:
        if base_name == name:
            raise TableError(f"engine table {name} is based on itself")
        base = dict(engine_table(base_name))
        base["rules"] = list(base["rules"])
    else:
        base = {"ops": frozenset(), "rules": []}
    table = {**base, **{k: v for k, v in raw.items() if k not in _CHANGES}}
    ops = set(raw["ops"]["list"]) if "ops" in raw else set(base["ops"])
    ops |= set((raw.get("ops_added") or {}).get("list", ()))
    ops -= set((raw.get("ops_removed") or {}).get("list", ()))
    table["ops"] = frozenset(ops)
    table["ops_source"] = "; ".join(s for s in (base.get("ops_source"), (raw.get("ops") or {}).get("source"),
                                                (raw.get("ops_added") or {}).get("source"),
                                                (raw.get("ops_removed") or {}).get("source")) if s)
    removed = set(raw.get("rules_removed") or ())
    added = list(raw.get("rules", [])) + list(raw.get("rules_added") or [])
    added_ids = {r["id"] for r in added}
    table["rules"] = [r for r in base["rules"] if r["id"] not in removed and r["id"] not in added_ids] + added
    for key in ("engine", "title", "package", "source", "unknown_op"):
        if key not in table:
            raise TableError(f"engine table {name} has no {key!r}")
    for row in table["rules"]:
        for key in ("id", "kind", "severity", "message", "source"):
            if key not in row:
                raise TableError(f"engine table {name}: rule {row.get('id', row)} has no {key!r}")
    return table


@functools.lru_cache(maxsize=None)
def package_table(package: str) -> Dict[str, Any]:
    """The ML-Agents checks of C# package ``package`` ("2.x", "3.x", "4.x")."""
    return _read(os.path.join(PACKAGE_DIR, f"ml-agents-{package}.yaml"), f"ml-agents-{package}")


@functools.lru_cache(maxsize=None)
def hints() -> Dict[str, Dict[str, str]]:
    return _read(os.path.join(HERE, "hints.yaml"), "hints")


def _read(path: str, name: str) -> Dict[str, Any]:
    if not os.path.exists(path):
        raise TableError(f"no rule table {name} ({path})")
    with open(path, encoding="utf-8") as f:
        data = yaml.load(f, Loader=_LOADER)
    if not isinstance(data, dict):
        raise TableError(f"rule table {path} is not a mapping")
    return data
