"""A function-dummy compatible composition function, written with the official Python SDK
(crossplane-function-sdk-python), for the conformance suite (tests/conformance.rs).

Like crossplane-contrib's function-dummy, its step input is `dummy.fn.crossplane.io/v1beta1`
`Response`, whose `response` field holds a RunFunctionResponse written as YAML (protobuf JSON names,
enum values by name: READY_TRUE, SEVERITY_NORMAL). It answers with the request's desired state, tag and
context, and merges that response over it with protobuf merge semantics: maps merged by key (a key's
value replaced), lists appended, scalars replaced.

Usage: python dummy.py --address 127.0.0.1:PORT
"""

import serving
from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from google.protobuf import json_format


class Function(grpcv1.FunctionRunnerService):
    async def RunFunction(self, req: fnv1.RunFunctionRequest, _context) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        given = resource.struct_to_dict(req.input).get("response") or {}
        try:
            overlay = json_format.ParseDict(given, fnv1.RunFunctionResponse())
        except json_format.ParseError as e:
            response.fatal(rsp, f"cannot parse the input's response as a RunFunctionResponse: {e}")
            return rsp
        rsp.MergeFrom(overlay)
        return rsp


if __name__ == "__main__":
    serving.main(Function())
