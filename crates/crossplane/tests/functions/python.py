"""A function-python compatible composition function, written with the official Python SDK
(crossplane-function-sdk-python), for the conformance suite (tests/conformance.rs).

Like crossplane-contrib's function-python, its step input is `python.fn.crossplane.io/v1beta1`
`Script`, whose `script` field is Python source defining `compose(req, rsp)`. Each call runs the script
in a fresh namespace and calls `compose` with the request and a response that already carries the
request's desired state, tag and context (the SDK's `response.to`, with its default 60 s TTL). An
exception becomes a Fatal result.

The script may also use `schemas` (this file's `require_schema` and `get_required_schema`): the
required-schemas fields of the function protocol (RunFunctionResponse `requirements.schemas`, field 3;
RunFunctionRequest `required_schemas`, field 9) that the installed SDK's generated code predates. They
are read and written through protobuf descriptors of those fields, built here with upstream's field
numbers and types.

Usage: python python.py --address 127.0.0.1:PORT [--tls-certs-dir DIR]
(with DIR, mutual TLS: DIR holds tls.crt, tls.key and the callers' ca.crt, as a packaged function's
TLS_SERVER_CERTS_DIR does)
"""
import traceback
import types

import serving
from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf import struct_pb2


def _schema_messages():
    """Message classes with only the required-schemas fields, at upstream's field numbers."""
    f = descriptor_pb2.FileDescriptorProto(
        name="crossplane_rs_required_schemas.proto",
        package="crossplane_rs.schemas",
        syntax="proto3",
        dependency=["google/protobuf/struct.proto"],
    )

    def msg(name, fields):
        m = f.message_type.add(name=name)
        for number, fname, ftype, label, type_name in fields:
            fd = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                fd.type_name = type_name
        return m

    T = descriptor_pb2.FieldDescriptorProto
    opt, rep = T.LABEL_OPTIONAL, T.LABEL_REPEATED
    msg("SchemaSelector", [(1, "api_version", T.TYPE_STRING, opt, None), (2, "kind", T.TYPE_STRING, opt, None)])
    msg("Schema", [(1, "openapi_v3", T.TYPE_MESSAGE, opt, ".google.protobuf.Struct")])
    req = msg("Request", [(9, "required_schemas", T.TYPE_MESSAGE, rep, ".crossplane_rs.schemas.Request.RequiredSchemasEntry")])
    e = req.nested_type.add(name="RequiredSchemasEntry")
    e.options.map_entry = True
    e.field.add(name="key", number=1, type=T.TYPE_STRING, label=opt)
    e.field.add(name="value", number=2, type=T.TYPE_MESSAGE, label=opt, type_name=".crossplane_rs.schemas.Schema")
    reqs = msg("Requirements", [(3, "schemas", T.TYPE_MESSAGE, rep, ".crossplane_rs.schemas.Requirements.SchemasEntry")])
    e = reqs.nested_type.add(name="SchemasEntry")
    e.options.map_entry = True
    e.field.add(name="key", number=1, type=T.TYPE_STRING, label=opt)
    e.field.add(name="value", number=2, type=T.TYPE_MESSAGE, label=opt, type_name=".crossplane_rs.schemas.SchemaSelector")

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(f.SerializeToString())
    get = lambda n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"crossplane_rs.schemas.{n}"))
    return get("Request"), get("Requirements")


_Request, _Requirements = _schema_messages()


def require_schema(rsp: fnv1.RunFunctionResponse, name: str, api_version: str, kind: str) -> None:
    """Asks for the OpenAPI schema of `api_version`/`kind`, to arrive as required schema `name`."""
    r = _Requirements()
    r.schemas[name].api_version = api_version
    r.schemas[name].kind = kind
    # Merged as wire bytes: the SDK's Requirements keeps field 3 as an unknown field and sends it.
    rsp.requirements.MergeFromString(r.SerializeToString())


def required_schemas(req: fnv1.RunFunctionRequest) -> dict:
    """The required schemas the request carries: name -> the schema (a dict; {} when not found)."""
    view = _Request.FromString(req.SerializeToString())
    return {k: json_format.MessageToDict(v.openapi_v3) if v.HasField("openapi_v3") else {}
            for k, v in view.required_schemas.items()}


def get_required_schema(req: fnv1.RunFunctionRequest, name: str) -> dict | None:
    """The required schema `name`, or None when the request does not carry it."""
    return required_schemas(req).get(name)


schemas = types.SimpleNamespace(
    require_schema=require_schema,
    required_schemas=required_schemas,
    get_required_schema=get_required_schema,
)


class Function(grpcv1.FunctionRunnerService):
    async def RunFunction(self, req: fnv1.RunFunctionRequest, _context) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        script = resource.struct_to_dict(req.input).get("script")
        if not isinstance(script, str) or not script.strip():
            response.fatal(rsp, "the input (python.fn.crossplane.io/v1beta1 Script) has no script")
            return rsp
        namespace = {"__name__": "composition_script", "schemas": schemas}
        try:
            exec(compile(script, "<script>", "exec"), namespace)
            compose = namespace.get("compose")
            if not callable(compose):
                response.fatal(rsp, "the script defines no compose(req, rsp) function")
                return rsp
            compose(req, rsp)
        except Exception as e:  # noqa: BLE001 - every failure of the script is the step's result
            response.fatal(rsp, f"the script failed: {e}: {traceback.format_exc(limit=3)}")
        return rsp


if __name__ == "__main__":
    serving.main(Function())
