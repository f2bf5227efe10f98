#!/usr/bin/env python3
"""Runs the real-client tests of routekey-proxy (mariadb CLI and PyMySQL).

Normally started by scripts/client-tests.sh, which builds and starts the proxy and sets
ROUTEKEY_PROXY_PORT. By hand, with a proxy already listening and the sandbox up:

    ROUTEKEY_PROXY_PORT=3307 .sandbox/venv/bin/python tests/clients/run.py [-k PATTERN] [MODULE...]

MODULE is test_cli or test_pymysql (default: both). Exits 1 if any check fails.
"""

import argparse
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MODULES = ["test_cli", "test_pymysql"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="*", default=MODULES, help="test modules to run")
    ap.add_argument("-k", dest="patterns", action="append", default=None,
                    help="only run tests whose name contains this substring (repeatable)")
    ap.add_argument("-q", "--quiet", action="store_true", help="one character per test")
    args = ap.parse_args()

    loader = unittest.TestLoader()
    if args.patterns:
        loader.testNamePatterns = ["*%s*" % p for p in args.patterns]
    suite = unittest.TestSuite(loader.loadTestsFromName(m) for m in args.modules)
    started = time.monotonic()
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=1 if args.quiet else 2,
                                     failfast=False, buffer=False).run(suite)
    elapsed = time.monotonic() - started
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    print("client tests: %d run, %d failed or errored, %d skipped, %.1fs"
          % (result.testsRun, failed, len(result.skipped), elapsed))
    if failed:
        print("failing tests:")
        for test, _ in result.failures + result.errors:
            print("  " + test.id() + (" " + test._subDescription() if hasattr(test, "_subDescription") else ""))
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
