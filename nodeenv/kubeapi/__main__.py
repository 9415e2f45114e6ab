"""`python -m nodeenv.kubeapi`: the API double as a daemon (make node-up runs it). SIGTERM stops it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys

from common.jsonlog import setup_logging
from common.malloc import pin_mmap_threshold
from nodeenv.kubeapi.auth import Recorder
from nodeenv.kubeapi.server import KubeApiServer
from nodeenv.kubeapi.settings import KubeApiSettings, parse
from nodeenv.kubeapi.tokenwebhook import WebhookConfigError

log = logging.getLogger("nodeenv.kubeapi")


def daemon_server(s: KubeApiSettings) -> KubeApiServer:
    """The server as the daemon runs it. It keeps no request record: that is for tests reading an
    in-process double (tests/kubeapi_fixture.py), nothing reads it in the daemon, and filling its
    10,000 + 10,000 entries grew the daemon's RSS by ~13 MB/h in the 30-minute soak."""
    names = tuple(dict.fromkeys(("localhost", "127.0.0.1", s.host)))  # its certificate names where it listens
    server = KubeApiServer(s.dir, s.config, host=s.host, port=s.port, server_names=names, also=s.also)
    server.state.recorder = Recorder(limit=0, audit_log=server.state.recorder.audit_log)  # the log stays
    return server


async def serve(s: KubeApiSettings) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = daemon_server(s)
    await server.start()
    users = {u: str(server.kubeconfig_for(u)) for u in s.users}
    also = [{"netns": a.netns, "url": a.url, "kubeconfig": str(path)}
            for a, path in zip(s.also, server.also_kubeconfigs().values(), strict=True)]  # fmt: skip
    if s.port_file:
        tmp = s.port_file.with_suffix(".tmp")
        info = {"https": server.port, "url": server.url, "kubeconfig": str(server.kubeconfig), "users": users,
                "also": also}  # fmt: skip
        tmp.write_text(json.dumps(info))
        tmp.replace(s.port_file)
    log.info("serving", extra={"url": server.url, "kubeconfig": str(server.kubeconfig)})
    await stop.wait()
    log.info("signal received; closing watches and stopping")
    await server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    settings = parse(sys.argv[1:] if argv is None else argv, os.environ)
    setup_logging(settings.log_level)
    pin_mmap_threshold()
    try:
        return asyncio.run(serve(settings))
    except (OSError, WebhookConfigError) as e:  # port in use, unwritable directory, a bad webhook config
        log.error("cannot serve: %s", e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
