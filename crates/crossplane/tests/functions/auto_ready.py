"""A function-auto-ready compatible composition function, written with the official Python SDK
(crossplane-function-sdk-python), for the conformance suite (tests/conformance.rs).

Like crossplane-contrib's function-auto-ready, it answers with the request's desired state, and marks
each desired composed resource ready whose observed counterpart has the condition Ready=True. It
leaves every other resource's readiness as the earlier steps set it.

Usage: python auto_ready.py --address 127.0.0.1:PORT
"""

import serving
from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1


class Function(grpcv1.FunctionRunnerService):
    async def RunFunction(self, req: fnv1.RunFunctionRequest, _context) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        for name, desired in rsp.desired.resources.items():
            observed = req.observed.resources.get(name)
            if observed is None:
                continue
            if resource.get_condition(observed.resource, "Ready").status == "True":
                desired.ready = fnv1.READY_TRUE
        return rsp


if __name__ == "__main__":
    serving.main(Function())
