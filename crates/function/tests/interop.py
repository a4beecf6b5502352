"""The Python side of tests/python_interop.rs, with the official SDK's generated protocol code
(crossplane-function-sdk-python's run_function_pb2).

Reads a hex-encoded RunFunctionRequest that Rust encoded on stdin, checks every field, decodes the same
bytes as v1beta1, then prints a hex-encoded RunFunctionResponse for Rust to check. Exits non-zero with
the reason on any mismatch.
"""
import sys

from google.protobuf import duration_pb2, struct_pb2
from crossplane.function.proto.v1 import run_function_pb2 as v1
from crossplane.function.proto.v1beta1 import run_function_pb2 as v1beta1


def check(cond, what):
    if not cond:
        sys.exit(f"python side: {what}")


raw = bytes.fromhex(sys.stdin.read().strip())
req = v1.RunFunctionRequest.FromString(raw)
check(req.meta.tag == "rust-tag", f"meta.tag {req.meta.tag!r}")
xr = req.observed.composite
check(xr.resource["kind"] == "XBucket", "observed composite kind")
check(xr.resource["spec"]["replicas"] == 3, "observed composite spec.replicas")
check(list(xr.resource["spec"]["zones"]) == ["a", "b"], "observed composite spec.zones")
check(xr.connection_details["password"] == b"s3cr3t\x00\xff", "observed composite connection details")
check(req.observed.resources["bucket"].resource["metadata"]["name"] == "b-1", "observed composed name")
check(req.desired.resources["bucket"].ready == v1.READY_TRUE, "desired ready")
check(req.HasField("input") and req.input["greeting"] == "hi", "input")
check(req.HasField("context") and req.context["apiextensions.crossplane.io/environment"]["x"] == 1.5, "context")
check(req.credentials["creds"].credential_data.data["key"] == b"k", "credentials")
check(req.required_resources["cfg"].items[0].resource["kind"] == "ConfigMap", "required_resources")
check(req.extra_resources["old"].items[0].resource["kind"] == "Secret", "extra_resources")
beta = v1beta1.RunFunctionRequest.FromString(raw)
check(beta.observed.composite.resource["kind"] == "XBucket", "v1beta1 decode")

rsp = v1.RunFunctionResponse()
rsp.meta.tag = "py-tag"
rsp.meta.ttl.CopyFrom(duration_pb2.Duration(seconds=60, nanos=5))
d = rsp.desired.resources["db"]
d.resource.update({"apiVersion": "example.org/v1", "kind": "DB", "spec": {"size": 10, "tags": ["x"]}})
d.ready = v1.READY_FALSE
d.connection_details["url"] = b"pg://"
rsp.desired.composite.resource.update({"status": {"phase": "ok"}})
rsp.results.add(severity=v1.SEVERITY_WARNING, message="careful", reason="Why", target=v1.TARGET_COMPOSITE_AND_CLAIM)
rsp.results.add(severity=v1.SEVERITY_FATAL, message="stop")
rsp.context.update({"k": "v"})
sel = rsp.requirements.resources["cfg"]
sel.api_version = "v1"
sel.kind = "ConfigMap"
sel.match_labels.labels["app"] = "a"
sel.namespace = "ns"
rsp.requirements.resources["one"].api_version = "v1"
rsp.requirements.resources["one"].kind = "Secret"
rsp.requirements.resources["one"].match_name = "s"
rsp.conditions.add(type="DatabaseReady", status=v1.STATUS_CONDITION_FALSE, reason="Waiting", message="m", target=v1.TARGET_COMPOSITE)
rsp.output.update({"n": 2})
print(rsp.SerializeToString().hex())
