"""The PATCH flavours of the API server, by Content-Type.

application/merge-patch+json: RFC 7386. application/json-patch+json: RFC 6902.
application/strategic-merge-patch+json (what the kubernetes python client sends for a dict
body): a merge patch whose lists of objects merge by their patchMergeKey (containers, env,
volumes by "name"; volumeMounts by "mountPath"; ports by "containerPort" or "port") and whose
other lists are replaced; ``$patch``/``$setElementOrder`` directives are ignored.
"""

import copy

from .store import KubeError, bad_request

MERGE_KEYS = {
    "containers": ("name",),
    "initContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "imagePullSecrets": ("name",),
    "volumeMounts": ("mountPath",),
    "ports": ("containerPort", "port"),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
}


def merge(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


def strategic(target, patch, field: str = ""):
    if isinstance(patch, list) and isinstance(target, list):
        return _merge_list(target, patch, field)
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic(result.get(key), value, key)
    return result


def _merge_list(target: list, patch: list, field: str) -> list:
    keys = MERGE_KEYS.get(field, ())
    items = [p for p in patch if isinstance(p, dict)]
    key = next((k for k in keys if items and all(k in p for p in items)), None)
    if key is None or len(items) != len(patch):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target)
    for item in items:
        index = next(
            (i for i, t in enumerate(result) if isinstance(t, dict) and t.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(strategic({}, item))
        else:
            result[index] = strategic(result[index], item)
    return result


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, parts: list[str]):
    for part in parts[:-1]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _json_op(doc, op: dict):
    kind, parts = op.get("op"), _pointer(op.get("path", ""))
    parent, last = _parent(doc, parts), parts[-1]
    if kind == "test":
        value = parent[int(last)] if isinstance(parent, list) else parent[last]
        if value != op.get("value"):
            raise KubeError(422, "Invalid", f"testing value {op.get('path')} failed")
    elif kind in ("remove", "replace"):
        if isinstance(parent, list):
            parent.pop(int(last))
        else:
            del parent[last]
    if kind in ("add", "replace"):
        value = copy.deepcopy(op.get("value"))
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), value)
        else:
            parent[last] = value
    elif kind not in ("test", "remove"):
        raise bad_request(f"unsupported JSON patch operation {kind!r}")


def json_patch(target, ops: list):
    """RFC 6902 (add, remove, replace, test)."""
    doc = copy.deepcopy(target)
    try:
        for op in ops:
            _json_op(doc, op)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
        raise KubeError(422, "Invalid", f"the JSON patch could not be applied: {exc}") from None
    return doc


def apply(target: dict, patch, content_type: str) -> dict:
    """The patched document; 415 for an unknown Content-Type, 400 for a malformed patch."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json-patch+json":
        if not isinstance(patch, list):
            raise bad_request("json patch must be a list of operations")
        return json_patch(target, patch)
    if not isinstance(patch, dict):
        raise bad_request("a merge patch must be a JSON object")
    if kind == "application/merge-patch+json":
        return merge(target, patch)
    if kind == "application/strategic-merge-patch+json":
        return strategic(target, patch)
    message = (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        f"application/strategic-merge-patch+json (got {kind})"
    )
    raise KubeError(415, "UnsupportedMediaType", message)
