#!/usr/bin/env python3
"""Run argocd/health/raycluster.lua the way Argo CD does, without Argo CD.

    python3 argocd/health/evaluate.py OBJECT.yaml|-    # print {"status":..., "message":...}
    python3 argocd/health/evaluate.py --test           # run health_test.yaml (Argo CD's format)
    kubectl get raycluster demo -o yaml | python3 argocd/health/evaluate.py -

Argo CD evaluates health checks in gopher-lua (Lua 5.1) with only the base, table, package
and a "safe" os library opened (util/lua/lua.go, SkipOpenLibs unless useOpenLibs), the object
as the global ``obj`` (JSON decoded: objects and arrays to tables, null to nil), and takes
the returned table's ``status`` and ``message``. This emulation uses lupa's Lua 5.1 runtime
and removes everything Argo CD does not open (string, math, io, debug, coroutine, os, and
the string metatable, so ``("x"):sub()`` fails as it does there). Needs ``pip install lupa``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "raycluster.lua"
TESTS = HERE / "health_test.yaml"
STATUSES = ("Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown")

# Run before the check: strip the runtime down to what Argo CD's VM offers.
_SANDBOX = """
local mt = getmetatable("")
if mt then mt.__index = nil end
string = nil; math = nil; io = nil; debug = nil; coroutine = nil; os = nil
dofile = nil; loadfile = nil; load = nil; loadstring = nil
"""


def _runtime():
    try:
        from lupa import lua51
    except ImportError as err:  # pragma: no cover - exercised only without lupa
        raise RuntimeError("lupa (with its Lua 5.1 runtime) is needed: pip install lupa") from err
    return lua51.LuaRuntime(register_eval=False, register_builtins=False, unpack_returned_tuples=True)


def _to_lua(lua: Any, value: Any) -> Any:
    """JSON-like Python value -> Lua value, as Argo CD's decodeValue does."""
    if isinstance(value, dict):
        table = lua.table()
        for key, item in value.items():
            if item is not None:
                table[str(key)] = _to_lua(lua, item)
        return table
    if isinstance(value, (list, tuple)):
        table = lua.table()
        for index, item in enumerate(value, start=1):
            table[index] = _to_lua(lua, item)
        return table
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return str(value)  # e.g. datetime from a YAML timestamp: JSON would carry a string


def evaluate(obj: dict[str, Any], script: str | None = None) -> dict[str, str]:
    """The health status and message Argo CD would show for ``obj``."""
    lua = _runtime()
    source = SCRIPT.read_text(encoding="utf-8") if script is None else script
    lua.execute(_SANDBOX)
    lua.globals().obj = _to_lua(lua, json.loads(json.dumps(obj, default=str)))
    result = lua.execute(source)
    if result is None or not hasattr(result, "items"):
        raise ValueError(f"health script returned {result!r}, not a table")
    health = {str(k): v for k, v in result.items()}
    if health.get("status") not in STATUSES:
        raise ValueError(f"health script returned status {health.get('status')!r}")
    return {"status": health["status"], "message": str(health.get("message") or "")}


def run_tests(tests: Path = TESTS) -> list[str]:
    """Run Argo CD's health_test.yaml format; return the failures (empty = all pass)."""
    import yaml

    failures = []
    for case in yaml.safe_load(tests.read_text(encoding="utf-8"))["tests"]:
        obj = yaml.safe_load((tests.parent / case["inputPath"]).read_text(encoding="utf-8"))
        got = evaluate(obj)
        want = {"status": case["healthStatus"]["status"], "message": case["healthStatus"].get("message", "")}
        if got != want:
            failures.append(f"{case['inputPath']}: want {want}, got {got}")
    return failures


def main(argv: list[str]) -> int:
    import yaml

    if argv == ["--test"]:
        failures = run_tests()
        for failure in failures:
            print(failure, file=sys.stderr)
        return 1 if failures else 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    text = sys.stdin.read() if argv[0] == "-" else Path(argv[0]).read_text(encoding="utf-8")
    print(json.dumps(evaluate(yaml.safe_load(text))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
