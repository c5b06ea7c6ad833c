"""What every vendor-client script here shares: checks that record a mismatch or an SDK exception and let
the others run, and the one JSON summary the test reads (its `problems` list), exiting 1 when there are any.
Imported before a script takes its own directory off `sys.path` (azure.py would shadow the SDK's package)."""

import json
import sys


class Mismatch(Exception):
    """What the emulator showed differs from what the real cloud would."""


def expect(cond, message):
    if not cond:
        raise Mismatch(message)


class Report:
    def __init__(self, sdk):
        self.sdk = sdk
        self.summary = {}
        self.errors = []

    def step(self, name, fn):
        """Runs one check: a mismatch or the SDK's own exception (a refusal, an answer it cannot parse) is
        recorded under `name`, and the other checks still run."""
        try:
            return fn()
        except Mismatch as e:
            self.errors.append(f"{name}: MISMATCH: {e}")
        except Exception as e:  # noqa: BLE001 - the SDK's own, whatever its type
            self.errors.append(f"{name}: {type(e).__name__}: {e}".replace("\n", " | "))
        return None

    def finish(self):
        """Prints the summary; exits 1 listing the problems on stderr when there are any."""
        self.summary["problems"] = self.errors
        print(json.dumps(self.summary, indent=1, sort_keys=True, default=str))
        if self.errors:
            print(f"{self.sdk} found these problems on the emulator:", file=sys.stderr)
            for e in self.errors:
                print(f"  - {e}", file=sys.stderr)
            sys.exit(1)
