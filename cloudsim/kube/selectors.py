"""labelSelector and fieldSelector of list calls, as k8s.io/apimachinery parses them.

Label terms: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``.
Field terms: ``path=v``, ``path==v``, ``path!=v`` on the fields each resource supports.
"""

import re

from .store import bad_request

FIELDS = {
    "pods": {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
    "events": {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    "namespaces": {"status.phase"},
    "secrets": {"type"},
    "nodes": {"spec.unschedulable"},
}
_SET = re.compile(r"^\s*(!?)([A-Za-z0-9._/-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_OP = re.compile(r"^\s*([A-Za-z0-9._/-]+)\s*(==|!=|=)\s*([A-Za-z0-9._/-]*)\s*$")


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return [t for t in terms if t.strip()]


def label_matcher(text: str):
    """A predicate on a labels dict; 400 BadRequest when the selector does not parse."""
    tests = []
    for term in _split(text or ""):
        op = _OP.match(term)
        if op:
            key, kind, value = op.groups()
            tests.append(lambda ls, k=key, v=value, neg=kind == "!=": (ls.get(k) == v) != neg)
            continue
        found = _SET.match(term)
        if not found:
            raise bad_request(f"unable to parse requirement: {term.strip()!r}")
        bang, key, kind, values = found.groups()
        if kind:
            wanted = {v.strip() for v in values.split(",")}
            neg = kind == "notin"
            tests.append(lambda ls, k=key, w=wanted, n=neg: (ls.get(k) in w) != n)
        else:
            tests.append(lambda ls, k=key, n=bool(bang): (k in ls) != n)
    return lambda labels: all(test(labels or {}) for test in tests)


def _value(obj: dict, path: str) -> str:
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if path == "source" and isinstance(value, dict):
        value = value.get("component")
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def field_matcher(plural: str, text: str):
    """A predicate on an object; 400 BadRequest for an unsupported field, as the API says."""
    tests = []
    for term in _split(text or ""):
        found = _OP.match(term)
        if not found:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term.strip()}'")
        path, kind, value = found.groups()
        if path not in {"metadata.name", "metadata.namespace"} | FIELDS.get(plural, set()):
            raise bad_request(f"field label not supported: {path}")
        tests.append(lambda o, p=path, v=value, n=kind == "!=": (_value(o, p) == v) != n)
    return lambda obj: all(test(obj) for test in tests)
