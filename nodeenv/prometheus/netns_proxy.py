"""An HTTP forward proxy from this namespace into the cluster's network namespaces, for Prometheus'
`proxy_url`: the way its scrapes reach daemons that listen on a node's own loopback.

Cluster mode keeps each node's /metrics listeners on 127.0.0.1 inside the node's namespace (the platform
guard's reasoning: nothing a pod could reach), and nothing of this namespace is routed to the underlay.
Prometheus (one process, here) scrapes target `node1:41234` through this proxy: the request line
`GET http://node1:41234/metrics HTTP/1.1` names the route `node1`, which the routes file maps to a
namespace (`{"node1": "k8shc-node1", ...}`, re-read on every request so a node that joins is
reachable at once); the proxy opens 127.0.0.1:41234 inside that namespace (nodeenv/netns_socket.py),
sends the request there and relays the answer, one request per connection. Only GET, only names in the
routes file, only loopback inside them: 405, 403, and 502 (with the reason) otherwise. A namespace
that is gone (a node lost) or a port nobody listens on is a 502, so Prometheus marks the target down.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
import urllib.parse
from pathlib import Path

from common.jsonlog import setup_logging
from nodeenv.netns_socket import connected_socket

log = logging.getLogger(__name__)

HEAD_LIMIT = 16384
HOP_BY_HOP = ("connection", "proxy-connection", "proxy-authorization", "keep-alive", "host")


def routes(path: Path) -> dict[str, str]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def write_routes(path: Path, table: dict[str, str]) -> None:
    """The routes file, replaced atomically (name -> namespace; '' = the proxy's own namespace)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
    tmp.replace(path)


async def _reply(writer: asyncio.StreamWriter, status: str, text: str) -> None:
    body = text.encode() + b"\n"
    writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                 "Connection: close\r\n\r\n".encode() + body)  # fmt: skip
    await writer.drain()


class NetnsProxy:
    def __init__(self, routes_file: Path, timeout: float = 5.0) -> None:
        self.routes_file, self.timeout = routes_file, timeout

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.timeout)
            await self._forward(head.decode("latin-1"), writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass  # the client went away or sent no complete head: nothing to answer
        finally:
            writer.close()

    async def _forward(self, head: str, writer: asyncio.StreamWriter) -> None:
        request_line, *header_lines = head.split("\r\n")
        method, _, rest = request_line.partition(" ")
        target = rest.rpartition(" ")[0]
        if method != "GET":
            return await _reply(writer, "405 Method Not Allowed", f"{method}: only GET")
        url = urllib.parse.urlsplit(target)
        table = routes(self.routes_file)
        if url.scheme != "http" or url.hostname not in table or url.port is None:
            return await _reply(writer, "403 Forbidden", f"{target}: not a route of this proxy")
        netns = table[url.hostname]
        try:
            sock = await asyncio.to_thread(self._connect, netns, url.port)
        except OSError as e:
            return await _reply(writer, "502 Bad Gateway", f"{url.hostname} ({netns or 'this namespace'}) "
                                f"127.0.0.1:{url.port}: {e.strerror or e}")  # fmt: skip
        up_reader, up_writer = await asyncio.open_connection(sock=sock)
        kept = [h for h in header_lines if h and h.partition(":")[0].strip().lower() not in HOP_BY_HOP]
        path = url.path + (f"?{url.query}" if url.query else "")
        up_writer.write("\r\n".join([f"GET {path or '/'} HTTP/1.1", f"Host: 127.0.0.1:{url.port}", *kept,
                                     "Connection: close", "", ""]).encode("latin-1"))  # fmt: skip
        await up_writer.drain()
        try:
            while chunk := await asyncio.wait_for(up_reader.read(65536), self.timeout):
                writer.write(chunk)
                await writer.drain()
        finally:
            up_writer.close()

    def _connect(self, netns: str, port: int) -> socket.socket:
        if not netns:
            return socket.create_connection(("127.0.0.1", port), timeout=self.timeout)
        return connected_socket(netns, "127.0.0.1", port, self.timeout)


async def serve(host: str, port: int, routes_file: Path, port_file: Path | None) -> None:
    proxy = NetnsProxy(routes_file)
    server = await asyncio.start_server(proxy.handle, host, port, limit=HEAD_LIMIT)
    bound = server.sockets[0].getsockname()[1]
    if port_file is not None:
        tmp = port_file.with_name(port_file.name + ".tmp")
        tmp.write_text(str(bound))
        tmp.replace(port_file)
    log.info("netns proxy on %s:%d, routes in %s", host, bound, routes_file)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    p = argparse.ArgumentParser(prog="python -m nodeenv.prometheus.netns_proxy", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--host", default=env.get("K8SHOST_NETNS_PROXY_HOST", "127.0.0.1"),
                   help="listen address (env K8SHOST_NETNS_PROXY_HOST)")  # fmt: skip
    p.add_argument("--port", type=int, default=int(env.get("K8SHOST_NETNS_PROXY_PORT", "0")),
                   help="listen port, 0 = any (env K8SHOST_NETNS_PROXY_PORT)")  # fmt: skip
    p.add_argument("--routes-file", type=Path, default=env.get("K8SHOST_NETNS_PROXY_ROUTES"),
                   required="K8SHOST_NETNS_PROXY_ROUTES" not in env,
                   help='JSON {"name": "netns", ...} (env K8SHOST_NETNS_PROXY_ROUTES)')  # fmt: skip
    p.add_argument("--port-file", type=Path, default=env.get("K8SHOST_NETNS_PROXY_PORT_FILE"),
                   help="holds the bound port once it listens (env …_PORT_FILE)")  # fmt: skip
    args = p.parse_args(argv)
    setup_logging()
    asyncio.run(serve(args.host, args.port, args.routes_file, args.port_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
