"""iam-webhook: the PlasmaCloud IAM TokenReview webhook for kube-apiserver.

iam-webhook serve        answer TokenReviews over HTTPS + mTLS (graceful on SIGTERM)
iam-webhook gen-dev-pki  DEVELOPMENT ONLY: CA, certificates, kubeconfig, signing key
iam-webhook mint         DEVELOPMENT ONLY: print a token signed with the dev key
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys

from common.jsonlog import setup_logging
from common.malloc import pin_mmap_threshold
from webhook.settings import DEV_WARNING, MintSettings, PkiSettings, ServeSettings, parse

log = logging.getLogger("webhook")


async def serve(settings: ServeSettings) -> int:
    from webhook.server import running  # keeps `mint`/`gen-dev-pki` from importing aiohttp

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with running(settings):
        await stop.wait()
        log.info("signal received; finishing in-flight reviews and stopping")
    return 0


def _cheap_log_records() -> None:
    """One log line per review: skip what our JSON lines never show (logging HOWTO, "Optimization")."""
    logging._srcfile = None  # no caller frame lookup (file/line are not in our JSON lines)
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def main(argv: list[str] | None = None) -> int:
    settings = parse(sys.argv[1:] if argv is None else argv, os.environ)
    if isinstance(settings, ServeSettings):
        setup_logging(settings.log_level)
        _cheap_log_records()
        pin_mmap_threshold()
        try:
            return asyncio.run(serve(settings))
        except (OSError, ValueError) as e:  # unreadable certificate, port in use, ...
            log.error("cannot serve: %s", e)
            return 1
    from webhook import devcerts

    if isinstance(settings, PkiSettings):
        paths = devcerts.gen_dev_pki(settings)
        print(json.dumps({k: str(v) for k, v in paths.items()}, indent=1))
        print(DEV_WARNING, file=sys.stderr)
        return 0
    assert isinstance(settings, MintSettings)
    print(devcerts.mint(settings))
    print(DEV_WARNING, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
