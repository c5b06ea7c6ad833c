"""Starts the AWS emulator: moto's server with terraform-provider-hpc's extensions and the common admin
API, on 127.0.0.1. Prints `READY http://127.0.0.1:PORT` when it accepts requests.

    python server.py [--port N] [--port-file PATH]
"""

import argparse
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hpc_moto  # noqa: E402

from moto.backends import get_backend  # noqa: E402,F401
from moto.core import models as core_models  # noqa: E402
from moto.moto_api import _internal  # noqa: E402
from moto.server import DomainDispatcherApplication, create_backend_app  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402


def reset():
    _internal.moto_api_backend.reset()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file")
    parser.add_argument("--exit-with-stdin", action="store_true", help="exit when standard input closes (the parent died)")
    args = parser.parse_args()
    if args.exit_with_stdin:
        def watch():
            sys.stdin.read()
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    hpc_moto.apply_patches()
    hpc_moto.conformance.preload()
    app = hpc_moto.AdminMiddleware(DomainDispatcherApplication(create_backend_app), reset)
    server = make_server("127.0.0.1", args.port, app, threaded=True)
    port = server.server_port
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"READY http://127.0.0.1:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    _ = core_models
    main()
