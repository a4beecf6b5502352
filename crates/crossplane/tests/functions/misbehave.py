"""A composition function written with the official Python SDK (crossplane-function-sdk-python), for
the core's function tests. Its step input chooses what it does:

  mode: compose       composes a ConfigMap `config` (data.value = the XR's spec.value), ready, with a
                      Normal result and the condition FunctionComposed=True; with `count: N`, N
                      ConfigMaps `config-0` ... instead (the benchmark's)
  mode: connection    composes nothing; desires the connection detail `value` (the XR's spec.value)
                      for the composite
  mode: slow          sleeps `seconds`, then composes as `compose`
  mode: fatal         returns a Fatal result
  mode: require-more  asks for a different ConfigMap on every call, so its requirements never settle
  mode: unknown-kind  composes a resource of a kind no API serves

With --garbage it serves no function: it answers RunFunction with bytes that are not a
RunFunctionResponse.

With --tls-certs-dir DIR it serves mutual TLS with DIR's tls.crt, tls.key and ca.crt (the SDK's
load_credentials), as a function installed by a package manager does.

Usage: python misbehave.py --address 127.0.0.1:PORT [--garbage | --tls-certs-dir DIR]
"""
import asyncio
import itertools

import grpc
import serving
from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

calls = itertools.count()


def compose(req: fnv1.RunFunctionRequest, rsp: fnv1.RunFunctionResponse, count=None) -> None:
    xr = resource.struct_to_dict(req.observed.composite.resource)
    value = str(xr.get("spec", {}).get("value", ""))
    names = ["config"] if count is None else [f"config-{i}" for i in range(int(count))]
    for name in names:
        resource.update(
            rsp.desired.resources[name],
            {"apiVersion": "v1", "kind": "ConfigMap", "data": {"value": value}},
        )
        rsp.desired.resources[name].ready = fnv1.READY_TRUE
    response.normal(rsp, f"composed config with value {value!r}")
    rsp.conditions.add(type="FunctionComposed", status=fnv1.STATUS_CONDITION_TRUE, reason="Composed")


class Function(grpcv1.FunctionRunnerService):
    async def RunFunction(self, req: fnv1.RunFunctionRequest, _context) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        spec = resource.struct_to_dict(req.input)
        mode = spec.get("mode", "compose")
        # One line per call: the benchmark counts them.
        print(f"RunFunction {mode}", flush=True)
        if mode == "compose":
            compose(req, rsp, spec.get("count"))
        elif mode == "connection":
            xr = resource.struct_to_dict(req.observed.composite.resource)
            value = str(xr.get("spec", {}).get("value", ""))
            rsp.desired.composite.connection_details["value"] = value.encode()
        elif mode == "slow":
            await asyncio.sleep(float(spec.get("seconds", 30)))
            compose(req, rsp)
        elif mode == "fatal":
            response.fatal(rsp, "this function always fails")
        elif mode == "require-more":
            n = next(calls)
            sel = rsp.requirements.resources["more"]
            sel.api_version = "v1"
            sel.kind = "ConfigMap"
            sel.match_name = f"never-the-same-{n}"
            sel.namespace = "default"
        elif mode == "unknown-kind":
            resource.update(
                rsp.desired.resources["ghost"],
                {"apiVersion": "nowhere.crossplane-rs.io/v1", "kind": "Ghost", "spec": {}},
            )
        else:
            response.fatal(rsp, f"unknown mode {mode!r}")
        return rsp


async def serve_garbage(address: str) -> None:
    def run(_request, _context):
        return b""

    handler = grpc.unary_unary_rpc_method_handler(
        run,
        request_deserializer=lambda b: b,
        # Field 1 (meta) as a length-delimited field claiming more bytes than follow.
        response_serializer=lambda _: b"\x0a\xff\xff\xff\x0f\x01",
    )
    server = grpc.aio.server()
    for package in ("v1", "v1beta1"):
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(
                f"apiextensions.fn.proto.{package}.FunctionRunnerService", {"RunFunction": handler}),),
        )
    server.add_insecure_port(address)
    await server.start()
    await server.wait_for_termination()


def main() -> None:
    p = serving.parser()
    p.add_argument("--garbage", action="store_true")
    args = p.parse_args()
    if args.garbage:
        asyncio.run(serve_garbage(args.address))
    else:
        serving.serve(Function(), args)


if __name__ == "__main__":
    main()
