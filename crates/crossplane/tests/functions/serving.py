"""How every test function here is served (crossplane-function-sdk-python's runtime): on `--address`,
in plain text, or with mutual TLS when `--tls-certs-dir` names a directory holding tls.crt, tls.key and
ca.crt.
"""
import argparse

from crossplane.function import runtime


def parser() -> argparse.ArgumentParser:
    """The arguments every function takes; a function may add its own."""
    p = argparse.ArgumentParser()
    p.add_argument("--address", required=True)
    p.add_argument("--tls-certs-dir", help="serve with mutual TLS: tls.crt, tls.key and ca.crt")
    return p


def serve(function, args: argparse.Namespace) -> None:
    """Serves `function` as `args` say, until the process is stopped."""
    if args.tls_certs_dir:
        creds = runtime.load_credentials(args.tls_certs_dir)
        runtime.serve(function, args.address, creds=creds, insecure=False)
    else:
        runtime.serve(function, args.address, creds=None, insecure=True)


def main(function) -> None:
    """Parses the common arguments and serves `function`."""
    serve(function, parser().parse_args())
