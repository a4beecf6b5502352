"""A function-environment-configs compatible composition function, written with the official Python SDK
(crossplane-function-sdk-python), for the conformance suite's environment scenarios
(tests/conformance.rs).

The contract, as crossplane-contrib's function-environment-configs has it: its step input is
`environmentconfigs.fn.crossplane.io/v1beta1` `Input` with `spec.environmentConfigs` (each of type
`Reference` (the default) by `ref.name`, or `Selector` by `selector.matchLabels`, whose values come from
the XR (`FromCompositeFieldPath`, the default), the environment (`FromEnvironmentFieldPath`) or a literal
(`Value`); selector `mode` `Single` (the default, exactly one match) or `Multiple` (sorted by
`sortByFieldPath`, default `metadata.name`, cut at `maxMatch`, at least `minMatch`)),
`spec.policy.resolution` (`Required`, the default, or `Optional`: a missing referenced config is skipped)
and `spec.defaultData`.

It asks the core for the EnvironmentConfigs as required resources (`environment-config-<index>`), then
merges their `data` in the order listed (later wins, maps merged by key) over the environment already in
the context and the default data, and puts the result in the context key
`apiextensions.crossplane.io/environment`, where function-patch-and-transform's environment patches
read it. Like upstream's function it keeps nothing on the XR, so it resolves on every call (upstream's
old `policy.resolve: IfNotPresent` has no v2 equivalent).

Usage: python environment_configs.py --address 127.0.0.1:PORT
"""
import re

import serving
from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

CONTEXT_KEY = "apiextensions.crossplane.io/environment"
API_VERSION = "apiextensions.crossplane.io/v1beta1"
KIND = "EnvironmentConfig"


class Error(Exception):
    pass


def field(obj, path):
    """The value at a Crossplane field path (`a.b[key]`, `a[0]`), or None."""
    cur = obj
    for part in re.findall(r"[^.\[\]]+", path):
        if isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                return None
        elif isinstance(cur, dict):
            if part not in cur:
                return None
            cur = cur[part]
        else:
            return None
    return cur


def set_field(obj, path, value):
    parts = re.findall(r"[^.\[\]]+", path)
    cur = obj
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value


def merge(a, b):
    """b over a: maps merged by key, anything else replaced."""
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def match_labels(matchers, xr, env):
    labels = {}
    for m in matchers or []:
        kind = m.get("type") or "FromCompositeFieldPath"
        key = m.get("key")
        if kind == "Value":
            labels[key] = m.get("value")
            continue
        source = xr if kind == "FromCompositeFieldPath" else env
        path = m.get("valueFromFieldPath") or ""
        value = field(source, path)
        if not isinstance(value, str):
            if m.get("fromFieldPathPolicy") == "Optional":
                continue
            where = "composite" if kind == "FromCompositeFieldPath" else "environment"
            raise Error(f"cannot get value from {where} field path {path!r}: no string there")
        labels[key] = value
    return labels


def sort_key(path):
    def key(obj):
        v = field(obj, path)
        return (v is not None, v if v is not None else 0)

    return key


def selected(spec, required):
    optional = (spec.get("policy") or {}).get("resolution") == "Optional"
    out = []
    for i, source in enumerate(spec.get("environmentConfigs") or []):
        name = f"environment-config-{i}"
        if name not in required:
            continue
        found = required[name]
        if (source.get("type") or "Reference") == "Reference":
            ref = (source.get("ref") or {}).get("name")
            if not found:
                if optional:
                    continue
                raise Error(f"required EnvironmentConfig {ref!r} not found")
            if len(found) > 1:
                raise Error(f"expected exactly one EnvironmentConfig {ref!r}, got {len(found)}")
            out.append((source, found[0]))
            continue
        selector = source.get("selector") or {}
        if (selector.get("mode") or "Single") == "Single":
            if len(found) != 1:
                raise Error(f"{name}: selector mode Single expects exactly one EnvironmentConfig, got {len(found)}")
            out.append((source, found[0]))
            continue
        # protobuf Struct numbers arrive as floats.
        min_match = selector.get("minMatch")
        if min_match is not None and len(found) < int(min_match):
            raise Error(f"{name}: expected at least {int(min_match)} EnvironmentConfigs, got {len(found)}")
        found = sorted(found, key=sort_key(selector.get("sortByFieldPath") or "metadata.name"))
        if selector.get("maxMatch") is not None:
            found = found[: int(selector["maxMatch"])]
        out.extend((source, f) for f in found)
    return out


class Function(grpcv1.FunctionRunnerService):
    async def RunFunction(self, req: fnv1.RunFunctionRequest, _context) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        spec = resource.struct_to_dict(req.input).get("spec") or {}
        sources = spec.get("environmentConfigs")
        if not sources:
            return rsp
        xr = resource.struct_to_dict(req.observed.composite.resource)
        env = resource.struct_to_dict(req.context[CONTEXT_KEY]) if CONTEXT_KEY in req.context else {}
        try:
            for i, source in enumerate(sources):
                name = f"environment-config-{i}"
                if (source.get("type") or "Reference") == "Reference":
                    sel = rsp.requirements.resources[name]
                    sel.api_version, sel.kind = API_VERSION, KIND
                    sel.match_name = (source.get("ref") or {}).get("name") or ""
                    continue
                labels = match_labels((source.get("selector") or {}).get("matchLabels"), xr, env)
                if not labels:
                    continue
                sel = rsp.requirements.resources[name]
                sel.api_version, sel.kind = API_VERSION, KIND
                sel.match_labels.labels.update(labels)
            if not req.required_resources:
                return rsp
            required = {
                k: [resource.struct_to_dict(r.resource) for r in v.items] for k, v in req.required_resources.items()
            }
            merged = {}
            for source, cfg in selected(spec, required):
                data = cfg.get("data") or {}
                if source.get("toFieldPath"):
                    wrapped = {}
                    set_field(wrapped, source["toFieldPath"], data)
                    data = wrapped
                merged = merge(merged, data)
        except Error as e:
            response.fatal(rsp, str(e))
            return rsp
        merged = merge(env, merged)
        merged = merge(spec.get("defaultData") or {}, merged)
        merged.setdefault("apiVersion", "internal.crossplane.io/v1alpha1")
        merged.setdefault("kind", "Environment")
        rsp.context[CONTEXT_KEY] = merged
        return rsp


if __name__ == "__main__":
    serving.main(Function())
