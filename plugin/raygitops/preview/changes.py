"""Field-level changes of one object between base and head (pure).

``jsonpatch.make_patch`` on the two objects, with every ``raygitops.dev/*`` annotation taken
out first (hashes are reported per group, the strategy on its own).  Each operation becomes a
:class:`FieldChange` with a JSON-pointer path, the old and the new value, and whether the
field is *pod-shaping* (the target KubeRay's pod builder reads it, see
:mod:`raygitops.model.podrules`).  Values whose NAME looks secret (an env var ``DB_PASSWORD``, a key
``apiKey``, …: :func:`looks_secret`, plus the app's own ``preview.mask`` / ``preview.unmask``
patterns) are masked: the report still shows that they changed, never what they are.  Other
env values are shown (``RAY_LOG_LEVEL: info → debug``), and ``valueFrom`` references always.
"""

from __future__ import annotations

import copy
import fnmatch
import re
from dataclasses import dataclass
from typing import Any

import jsonpatch
import jsonpointer

from raygitops.model.names import ANNOTATION_PREFIX
from raygitops.model import podrules
from raygitops.model.hashing import NEWEST, HashRules

MASK = "••••"
ABSENT: Any = object()  # the field does not exist on that side

# A key whose name contains one of these holds a secret value ...
_SECRET_WORDS = ("password", "passwd", "secret", "token", "credential", "apikey",
                 "privatekey", "accesskey", "passphrase")
# ... unless the key only names or locates one (secretKeyRef, secretName, tokenPath, ...).
_REFERENCE_SUFFIXES = ("ref", "refs", "name", "names", "path", "file", "selector", "seconds",
                       "mode", "items", "mountpath", "source", "projection")


def looks_secret(key: str) -> bool:
    """Whether a mapping key's value should never be shown ("password", "apiKey", …)."""
    flat = re.sub(r"[^a-z0-9]", "", key.lower())
    if not flat or flat == "key":  # secretKeyRef.key, matchExpressions.key: names, not secrets
        return False
    if flat.endswith(_REFERENCE_SUFFIXES):
        return False
    return flat.endswith("key") or any(word in flat for word in _SECRET_WORDS)


@dataclass(frozen=True)
class Masking:
    """Which names hold secrets: :func:`looks_secret`, plus the ``mask`` and minus the
    ``unmask`` glob patterns of the app's ``raygitops.yaml`` (``preview:``), matched
    case-insensitively against a key or an env var's name (``unmask`` wins)."""

    mask: tuple[str, ...] = ()
    unmask: tuple[str, ...] = ()

    def secret(self, name: Any) -> bool:
        if not isinstance(name, str):
            return True  # an env entry without a usable name: never show its value
        lowered = name.lower()
        if any(fnmatch.fnmatchcase(lowered, p.lower()) for p in self.unmask):
            return False
        return any(fnmatch.fnmatchcase(lowered, p.lower()) for p in self.mask) or looks_secret(name)


DEFAULT_MASKING = Masking()


@dataclass(frozen=True)
class FieldChange:
    op: str  # "add", "remove", "replace", "move"
    path: str  # JSON pointer on the head object (for "remove": on the base object)
    old: Any  # ABSENT for "add"
    new: Any  # ABSENT for "remove"
    pod_shaping: bool
    group: str | None  # "head", "worker:<name>", or None (cluster-wide or metadata)
    masked: bool = False
    from_path: str | None = None  # "move" only
    same_value: bool = False  # pod-shaping field whose group hashes did not change
    hash_ignored: bool = False  # a template label/annotation key the hash leaves out (hash.ignore)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "path": self.path}
        if self.from_path is not None:
            out["from"] = self.from_path
        if self.old is not ABSENT:
            out["old"] = self.old
        if self.new is not ABSENT:
            out["new"] = self.new
        out["podShaping"] = self.pod_shaping
        out["group"] = self.group
        out["masked"] = self.masked
        out["sameValue"] = self.same_value
        if self.hash_ignored:
            out["hashIgnored"] = True
        return out


def strip_raygitops_annotations(obj: Any) -> Any:
    """A copy of ``obj`` without any ``raygitops.dev/*`` annotation.  The annotation maps
    stay (maybe empty): render stamps both sides alike, so a user's new annotation shows as
    one added key, not as a new map."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if key == "annotations" and isinstance(value, dict):
                out[key] = {k: copy.deepcopy(v) for k, v in value.items()
                            if not (isinstance(k, str) and k.startswith(ANNOTATION_PREFIX))}
            else:
                out[key] = strip_raygitops_annotations(value)
        return out
    if isinstance(obj, list):
        return [strip_raygitops_annotations(v) for v in obj]
    return obj


def _without_ours(annotations: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in annotations.items()
            if not (isinstance(k, str) and k.startswith(ANNOTATION_PREFIX))}


def _stripped(key: str, value: Any) -> Any:
    if key == "annotations" and isinstance(value, dict):
        return _without_ours(value)
    return strip_raygitops_annotations(value)


def _prune(old: Any, new: Any) -> tuple[Any, Any]:
    """Copies of two objects for ``make_patch``: ``raygitops.dev/*`` annotations removed, and
    every mapping value equal on both sides replaced by ``None`` on both sides.

    jsonpatch walks every key of both trees (and ``json.dumps`` every scalar pair), equal or
    not; pruning the equal subtrees first makes a diff cost what changed, not what exists.
    The patch is the same: a pruned value is equal on both sides, so it yields no operation,
    and values inside lists (which jsonpatch may add, remove or move) are never pruned.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        o: dict[str, Any] = {}
        n: dict[str, Any] = {}
        for key, value in old.items():
            if key not in new:
                o[key] = _stripped(key, value)
                continue
            other = new[key]
            if value == other:
                o[key] = n[key] = None
            elif key == "annotations" and isinstance(value, dict) and isinstance(other, dict):
                o[key], n[key] = _prune(_without_ours(value), _without_ours(other))
            else:
                o[key], n[key] = _prune(value, other)
        for key, value in new.items():
            if key not in old:
                n[key] = _stripped(key, value)
        return o, n
    return strip_raygitops_annotations(old), strip_raygitops_annotations(new)


def _unstamped(value: Any) -> Any:
    """A value to show without the maps that held only raygitops' stamps: render gives every
    pod template ``metadata.annotations`` for its hash, which is empty once the stamps are
    taken out (an added worker group would show ``"metadata":{"annotations":{}}``).  Inside
    the value only: a change AT an annotation map is shown as it is."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = _unstamped(item)
            if key in ("annotations", "metadata") and item == {}:
                continue
            out[key] = item
        return out
    if isinstance(value, list):
        return [_unstamped(item) for item in value]
    return value


def _tokens(pointer: str) -> list[str]:
    return jsonpointer.JsonPointer(pointer).parts


def _group_of(tokens: list[str], worker_names: list[str]) -> str | None:
    if len(tokens) < 2 or tokens[0] != "spec":
        return None
    if tokens[1] == "headGroupSpec":
        return "head"
    if tokens[1] == "workerGroupSpecs" and len(tokens) >= 3:
        try:
            return f"worker:{worker_names[int(tokens[2])]}"
        except (ValueError, IndexError):
            return None
    return None


def _mask_tree(value: Any, masking: Masking, env_entry: bool = False) -> tuple[Any, bool]:
    """Mask secret-named keys and the values of secret-named env vars inside a value;
    (value, anything masked)."""
    masked = False
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        secret_env = env_entry and masking.secret(value.get("name"))
        for k, v in value.items():
            if isinstance(k, str) and masking.secret(k) and not (k == "secret" and isinstance(v, dict)) \
                    and not (env_entry and k in ("name", "valueFrom")):
                out[k] = _mask_all(v)
                masked = True
            elif secret_env and k == "value":
                out[k] = MASK
                masked = True
            elif k == "env" and isinstance(v, list):
                items = []
                for item in v:
                    new_item, m = _mask_tree(item, masking, env_entry=True)
                    items.append(new_item)
                    masked = masked or m
                out[k] = items
            else:
                out[k], m = _mask_tree(v, masking)
                masked = masked or m
        return out, masked
    if isinstance(value, list):
        items = []
        for item in value:
            new_item, m = _mask_tree(item, masking)
            items.append(new_item)
            masked = masked or m
        return items, masked
    return value, False


def _mask_all(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_all(v) for v in value]
    return MASK


def mask(tokens: list[str], value: Any, masking: Masking = DEFAULT_MASKING,
         env_names: tuple[Any, ...] = (None,)) -> tuple[Any, bool]:
    """The value to show for the field at ``tokens``; (value, whether it was masked).
    ``env_names``: the names the env var a ``.../env/<i>/value`` path belongs to has on
    either side (masked when one of them is secret)."""
    if value is ABSENT:
        return value, False
    last = len(tokens) - 1
    if any(masking.secret(t) and not t.isdigit() and not (t == "secret" and i < last)  # a volume's secret: {...}
           for i, t in enumerate(tokens)):
        return _mask_all(value), True
    env_at = [i for i, t in enumerate(tokens) if t == "env"]
    if env_at:
        rest = tokens[env_at[-1] + 1 :]
        if len(rest) == 2 and rest[1] == "value":
            return (MASK, True) if any(masking.secret(name) for name in env_names) else (value, False)
        if len(rest) == 1:  # a whole env entry
            shown, masked = _mask_tree({"env": [value]}, masking)
            return shown["env"][0], masked
        if not rest:  # the whole env list: shown as its items, as any other list
            shown, masked = _mask_tree({"env": value}, masking)
            return shown["env"], masked
    return _mask_tree(value, masking)


def _env_names(tokens: list[str], *docs: Any) -> tuple[Any, ...]:
    """The ``name`` the env entry a ``.../env/<i>/value`` path points into has in each of
    ``docs`` that holds one (None for an entry without a name; ``(None,)`` when the path is
    not such a value)."""
    env_at = [i for i, t in enumerate(tokens) if t == "env"]
    if not env_at or len(tokens) != env_at[-1] + 3 or tokens[-1] != "value":
        return (None,)
    pointer = "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens[:-1])
    entries = [jsonpointer.resolve_pointer(doc, pointer, None) for doc in docs]
    return tuple(entry.get("name") for entry in entries if isinstance(entry, dict))


def hash_ignored_path(tokens: list[str], rules: HashRules) -> bool:
    """A pod-template label or annotation whose key the template hash leaves out."""
    if len(tokens) < 4 or tokens[0] != "spec":
        return False
    rest = tokens[2:] if tokens[1] == "headGroupSpec" else tokens[3:] if tokens[1] == "workerGroupSpecs" else []
    return (len(rest) == 4 and rest[:2] == ["template", "metadata"] and rest[2] in ("labels", "annotations")
            and rules.ignored(rest[3]))


def field_changes(base: dict[str, Any], head: dict[str, Any], *, raycluster: bool = True,
                  masking: Masking = DEFAULT_MASKING, rules: HashRules = NEWEST) -> list[FieldChange]:
    """Every field that differs between two objects, sorted by path."""
    old_obj, new_obj = _prune(base, head)
    patch = jsonpatch.make_patch(old_obj, new_obj)
    worker_names = [
        g.get("groupName", "") if isinstance(g, dict) else ""
        for g in ((head.get("spec") or {}).get("workerGroupSpecs") or [])
    ] if raycluster else []
    base_workers = [
        g.get("groupName", "") if isinstance(g, dict) else ""
        for g in ((base.get("spec") or {}).get("workerGroupSpecs") or [])
    ] if raycluster else []
    doc = old_obj  # patched step by step: list indices refer to the document as it goes
    out: list[FieldChange] = []
    for operation in patch.patch:
        op = operation["op"]
        path = operation["path"]
        tokens = _tokens(path)
        from_path = operation.get("from")
        if op == "add":
            old, new = ABSENT, operation["value"]
        elif op == "remove":
            old, new = jsonpointer.resolve_pointer(doc, path), ABSENT
        elif op == "replace":
            old, new = jsonpointer.resolve_pointer(doc, path), operation["value"]
        elif op in ("move", "copy"):
            old = jsonpointer.resolve_pointer(doc, path, ABSENT) if op == "copy" else ABSENT
            new = jsonpointer.resolve_pointer(doc, from_path)
        else:  # "test": make_patch never emits it
            continue
        # The entry's name before and after this operation, and at the same place in base
        # and head: an earlier operation of the patch may have renamed it (an env var
        # replaced by another at the same index), and a value is masked if any is secret.
        before = _env_names(tokens, doc, base)
        doc = jsonpatch.JsonPatch([operation]).apply(doc, in_place=True)
        after = _env_names(tokens, doc, head)
        old_shown, old_masked = mask(tokens, old, masking, before + after)
        new_shown, new_masked = mask(tokens, new, masking, before + after)
        if old_masked != new_masked and old is not ABSENT and new is not ABSENT:
            # renamed into or out of a secret name: show neither side
            old_shown, old_masked, new_shown, new_masked = _mask_all(old), True, _mask_all(new), True
        if from_path is not None and not new_masked:  # a value moved out of a secret field
            new_shown, new_masked = mask(_tokens(from_path), new, masking)
            if not new_masked:
                new_shown, new_masked = mask(tokens, new, masking, before + after)
        names = base_workers if op == "remove" else worker_names
        ignored = raycluster and hash_ignored_path(tokens, rules)
        shaping = raycluster and podrules.path_shapes_pods(tokens, rules.pod_rules) and not ignored
        if op == "move" and from_path is not None:
            shaping = shaping or (raycluster and podrules.path_shapes_pods(_tokens(from_path), rules.pod_rules))
        out.append(FieldChange(
            op=op,
            path=path,
            old=_unstamped(copy.deepcopy(old_shown)) if old_shown is not ABSENT else ABSENT,
            new=_unstamped(copy.deepcopy(new_shown)) if new_shown is not ABSENT else ABSENT,
            pod_shaping=shaping,
            group=_group_of(tokens, names) if raycluster else None,
            masked=old_masked or new_masked,
            from_path=from_path,
            hash_ignored=ignored,
        ))
    # make_patch walks dict keys in set order (varies with PYTHONHASHSEED): sort for stable
    # reports.  Values were read in patch order above, so each stays right.
    out.sort(key=lambda c: (_sort_key(c.path), c.op))
    return out


def _sort_key(pointer: str) -> tuple:
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in _tokens(pointer))
